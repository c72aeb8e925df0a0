#!/usr/bin/env escript
%%! -noshell
%% radump.escript wal FILE | segment FILE | snapshot DIR
%%
%% The dump oracle of the quorum-queue datasets: what the installed
%% broker's own ra (2.2.0 in RabbitMQ 3.10.8) reads from its files, one
%% JSON object per line.
%%
%%  wal:      the records walked with ra_log_wal's own binary patterns
%%            (recover_records: inline and reference writers, Adler-32 by
%%            erlang:adler32), each entry decoded with binary_to_term, the
%%            way the walk ended, and ra_log_wal:wal2list/1's entry count
%%            and last {index, term};
%%  segment:  the header, every index slot up to the first zero slot
%%            (parse_index_data), each entry read at its offset with its
%%            CRC checked by erlang:crc32, ra_log_segment:dump_index/1's
%%            slot count, and ra_log_segment:open/2 + range/1 + read_cons/5
%%            (which exits on a CRC failure);
%%  snapshot: ra_log_snapshot:read_meta/1 and recover/1, and
%%            rabbit_fifo:overview/1 of the recovered state.
%%
%% RABBIT_EBIN_ROOT is the broker's plugins dir (default Debian's
%% /usr/lib/rabbitmq/lib/rabbitmq_server-3.10.8/plugins).

main(Args) ->
    Root = case os:getenv("RABBIT_EBIN_ROOT") of
               false -> "/usr/lib/rabbitmq/lib/rabbitmq_server-3.10.8/plugins";
               R -> R
           end,
    [code:add_patha(D) || D <- filelib:wildcard(Root ++ "/*/ebin")],
    case Args of
        ["wal", F] -> wal(F);
        ["segment", F] -> segment(F);
        ["snapshot", D] -> snapshot(D);
        _ -> io:format(standard_error, "usage: radump.escript wal|segment|snapshot PATH~n", []), halt(2)
    end.

%% ---- WAL ----

wal(File) ->
    {ok, Bin} = file:read_file(File),
    Base = list_to_binary(filename:basename(File)),
    emit(#{kind => wal_header, file => Base, file_size => byte_size(Bin),
           magic_ok => binary:part(Bin, 0, min(5, byte_size(Bin))) =:= <<"RAWA", 1>>}),
    case Bin of
        <<"RAWA", 1, Rest/binary>> -> walk(Base, 5, Rest, #{}, 0);
        _ -> emit(#{kind => wal_end, file => Base, reason => bad_header, pos => 0, records => 0})
    end,
    try ra_log_wal:wal2list(File) of
        L ->
            Last = case L of [] -> #{}; _ -> {I, T, _} = lists:last(L), #{last_index => I, last_term => T} end,
            emit(Last#{kind => wal2list, file => Base, entries => length(L)})
    catch C:E ->
        emit(#{kind => wal2list, file => Base, error => fmt({C, E})})
    end.

walk(F, Pos, <<0:1, 0:1, 0:22, IdLen:16, _:IdLen/binary, 0:32, 0:32, _/binary>>, _, N) ->
    emit(#{kind => wal_end, file => F, reason => zero_record, pos => Pos, records => N});
walk(F, Pos, <<Trunc:1, 0:1, Ref:22, IdLen:16, UId:IdLen/binary, Sum:32, Len:32,
               Idx:64, Term:64, Data:Len/binary, Rest/binary>>, Cache, N) ->
    record(F, Pos, 3 + 2 + IdLen + 24, Trunc, 0, Ref, UId, Sum, Len, Idx, Term, Data, Rest),
    walk(F, Pos + 3 + 2 + IdLen + 24 + Len, Rest, Cache#{Ref => UId}, N + 1);
walk(F, Pos, <<Trunc:1, 1:1, Ref:22, Sum:32, Len:32, Idx:64, Term:64, Data:Len/binary, Rest/binary>>, Cache, N) ->
    UId = maps:get(Ref, Cache, undefined),
    record(F, Pos, 3 + 24, Trunc, 1, Ref, UId, Sum, Len, Idx, Term, Data, Rest),
    walk(F, Pos + 27 + Len, Rest, Cache, N + 1);
walk(F, Pos, <<>>, _, N) ->
    emit(#{kind => wal_end, file => F, reason => eof, pos => Pos, records => N});
walk(F, Pos, Partial, _, N) ->
    emit(#{kind => wal_end, file => F, reason => partial_record, pos => Pos, records => N,
           partial_bytes => byte_size(Partial)}).

record(F, Pos, HLen, Trunc, IsRef, Ref, UId, Sum, Len, Idx, Term, Data, Rest) ->
    Ok = Sum == 0 orelse erlang:adler32(<<Idx:64, Term:64, Data/binary>>) == Sum,
    Last = byte_size(Rest) < 13 orelse binary:part(Rest, 0, 13) =:= <<0:104>>,
    M = #{kind => wal_record, file => F, pos => Pos, header_len => HLen, trunc => Trunc,
          id_is_ref => IsRef, writer_ref => Ref, uid => uid(UId), checksum => Sum,
          checksum_ok => Ok, is_last => Last, data_len => Len, index => Idx, term => Term},
    emit(maps:merge(M, entry(Data))).

uid(undefined) -> null;
uid(B) -> B.

%% ---- segments ----

segment(File) ->
    {ok, Fd} = file:open(File, [read, raw, binary]),
    Base = list_to_binary(filename:basename(File)),
    Size = filelib:file_size(File),
    {ok, <<"RASG", Vsn:16, MaxCount:16>>} = file:pread(Fd, 0, 8),
    SlotSize = case Vsn of 1 -> 28; _ -> 32 end,
    DataStart = 8 + MaxCount * SlotSize,
    emit(#{kind => segment_header, file => Base, version => Vsn, max_count => MaxCount,
           data_start => DataStart, file_size => Size}),
    Table = case file:pread(Fd, 8, MaxCount * SlotSize) of {ok, T} -> T; eof -> <<>> end,
    Used = slots(Fd, Base, Vsn, Table, 0),
    emit(#{kind => index_end, file => Base, slots_used => Used}),
    file:close(Fd),
    ets:new(ra_io_metrics, [named_table, public, set]),
    ets:new(ra_open_file_metrics, [named_table, public, set]),
    {ok, _} = ra_file_handle:start_link(),
    DI = ra_log_segment:dump_index(File),
    emit(#{kind => ra_dump_index, file => Base, slots => case DI of L when is_list(L) -> length(L); _ -> 0 end}),
    {ok, S} = ra_log_segment:open(File, #{mode => read}),
    case ra_log_segment:range(S) of
        undefined ->
            emit(#{kind => ra_range, file => Base, range => null});
        {First, Last} ->
            emit(#{kind => ra_range, file => Base, first => First, last => Last}),
            try ra_log_segment:read_cons(S, First, Last - First + 1, fun(B) -> B end, []) of
                Es -> emit(#{kind => ra_fold, file => Base, entries => length(Es)})
            catch C:E ->
                emit(#{kind => ra_fold, file => Base, error => fmt({C, E})})
            end
    end.

slots(_Fd, _F, 2, <<0:64, 0:64, 0:64, 0:32, 0:32, _/binary>>, N) -> N;
slots(_Fd, _F, 1, <<0:64, 0:64, 0:32, 0:32, 0:32, _/binary>>, N) -> N;
slots(Fd, F, 2, <<Idx:64, Term:64, Off:64, Len:32, Crc:32, Rest/binary>>, N) ->
    slot(Fd, F, N, Idx, Term, Off, Len, Crc),
    slots(Fd, F, 2, Rest, N + 1);
slots(Fd, F, 1, <<Idx:64, Term:64, Off:32, Len:32, Crc:32, Rest/binary>>, N) ->
    slot(Fd, F, N, Idx, Term, Off, Len, Crc),
    slots(Fd, F, 1, Rest, N + 1);
slots(_, _, _, _, N) -> N.

slot(Fd, F, N, Idx, Term, Off, Len, Crc) ->
    M = #{kind => segment_entry, file => F, slot => N, index => Idx, term => Term,
          offset => Off, length => Len, crc => Crc},
    case file:pread(Fd, Off, Len) of
        {ok, Data} when byte_size(Data) == Len ->
            Ok = Crc == 0 orelse erlang:crc32(Data) == Crc,
            emit(maps:merge(M#{crc_ok => Ok}, entry(Data)));
        _ ->
            emit(M#{crc_ok => false, short => true})
    end.

%% ---- snapshots ----

snapshot(Dir) ->
    Base = list_to_binary(filename:basename(Dir)),
    emit(#{kind => snapshot_meta, dir => Base, meta => fmt(ra_log_snapshot:read_meta(Dir))}),
    case ra_log_snapshot:recover(Dir) of
        {ok, Meta, State} ->
            Ov = try rabbit_fifo:overview(State) catch _:_ -> #{} end,
            emit(#{kind => snapshot_state, dir => Base, index => maps:get(index, Meta),
                   term => maps:get(term, Meta), machine_version => maps:get(machine_version, Meta, null),
                   num_messages => maps:get(num_messages, Ov, null),
                   num_ready_messages => maps:get(num_ready_messages, Ov, null),
                   num_checked_out => maps:get(num_checked_out, Ov, null)});
        Err ->
            emit(#{kind => snapshot_state, dir => Base, error => fmt(Err)})
    end.

%% ---- entries ----

entry(Data) ->
    try binary_to_term(Data) of
        T -> entry_term(T)
    catch _:_ -> #{entry => not_a_term}
    end.

entry_term({'$usr', Meta, Cmd, _Reply}) ->
    M = #{entry => '$usr', meta_ts => maps:get(ts, Meta, null)},
    maps:merge(M, command(Cmd));
entry_term({noop, _, Vsn}) -> #{entry => noop, machine_version => Vsn};
entry_term(T) when is_tuple(T) -> #{entry => element(1, T)};
entry_term(A) when is_atom(A) -> #{entry => A};
entry_term(_) -> #{entry => other}.

command(Cmd) when is_tuple(Cmd) ->
    Name = element(1, Cmd),
    M = #{command => Name},
    case Cmd of
        {enqueue, _Pid, Seq, Msg} ->
            maps:merge(M#{enq_seq => seq(Seq)}, message(Msg));
        {N, _Cid, Ids} when N == settle; N == return; N == discard ->
            M#{msg_ids => Ids};
        _ -> M
    end;
command(A) when is_atom(A) -> #{command => A};
command(_) -> #{}.

seq(undefined) -> null;
seq(N) -> N.

%% #basic_message{exchange_name, routing_keys, content, id, is_persistent}
message(Msg) when element(1, Msg) == basic_message ->
    Content = rabbit_binary_parser:ensure_content_decoded(element(4, Msg)),
    Props = element(3, Content),
    Payload = iolist_to_binary(lists:reverse(element(6, Content))),
    #{message_id => case element(10, Props) of undefined -> null; Id -> Id end,
      payload_size => byte_size(Payload),
      payload_sha256 => hex(crypto:hash(sha256, Payload)),
      store_id => case element(5, Msg) of B when is_binary(B) -> hex(B); _ -> null end};
message(_) -> #{}.

hex(B) -> list_to_binary([io_lib:format("~2.16.0b", [X]) || <<X>> <= B]).

fmt(T) -> iolist_to_binary(io_lib:format("~0tp", [T])).

%% ---- JSON ----

emit(M) -> io:put_chars([json(M), $\n]).

json(M) when is_map(M) ->
    KVs = [[json(to_bin(K)), $:, json(V)] || {K, V} <- lists:sort(maps:to_list(M))],
    [${, lists:join($,, KVs), $}];
json(L) when is_list(L) -> [$[, lists:join($,, [json(X) || X <- L]), $]];
json(true) -> <<"true">>;
json(false) -> <<"false">>;
json(null) -> <<"null">>;
json(A) when is_atom(A) -> json(atom_to_binary(A, utf8));
json(N) when is_integer(N) -> integer_to_binary(N);
json(B) when is_binary(B) -> [$", escape(B), $"].

to_bin(A) when is_atom(A) -> atom_to_binary(A, utf8);
to_bin(B) -> B.

escape(B) ->
    [case C of
         $" -> <<"\\\"">>;
         $\\ -> <<"\\\\">>;
         _ when C < 32; C > 126 -> io_lib:format("\\u~4.16.0b", [C]);
         _ -> C
     end || <<C>> <= B].
