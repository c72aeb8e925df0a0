#!/usr/bin/env escript
%%! -noshell
%% osiris131-dump.escript STREAM_DIR
%%
%% Prints every chunk of a stream dir as the RabbitMQ 3.10.8 broker's own
%% osiris 1.3.1 reads it: one JSON object per line. osiris 1.3.1 has no
%% dump functions, so this opens a replica-style data reader
%% (osiris_log:init_data_reader/2, which reads every chunk type across
%% segments) and calls osiris_log:read_chunk_parsed/2 with_header: the
%% chunk header as osiris decodes it, its CRC checked by osiris
%% (validate_crc/3), and the records as osiris splits them; user records
%% are decoded with the broker's amqp10_framing:decode_bin/1. The index
%% files are listed through osiris_log:overview/1 (range, epochs).
%%
%% Needs the installed broker's beams: RABBIT_PLUGINS (default
%% /usr/lib/rabbitmq/lib/rabbitmq_server-3.10.8/plugins).
-mode(compile).

main([Dir]) ->
    Plugins = case os:getenv("RABBIT_PLUGINS") of
                  false -> "/usr/lib/rabbitmq/lib/rabbitmq_server-3.10.8/plugins";
                  P -> P
              end,
    [code:add_patha(E) || E <- filelib:wildcard(Plugins ++ "/*/ebin")],
    {module, _} = code:ensure_loaded(osiris_log),
    {module, _} = code:ensure_loaded(amqp10_framing),
    Segs = lists:sort(filelib:wildcard("*.segment", Dir)),
    {Range, Epochs} = osiris_log:overview(Dir),
    out([{kind, overview}, {range, range(Range)},
         {epoch_offsets, {list, [{obj, [{epoch, E}, {offset, O}]} || {E, O} <- Epochs]}}]),
    case Range of
        empty -> ok;
        {First, _} ->
            Ref = atomics:new(2, []),
            atomics:put(Ref, 1, 1 bsl 62),
            atomics:put(Ref, 2, First),
            Conf = #{dir => Dir, name => list_to_binary(filename:basename(Dir)),
                     readers_counter_fun => fun(_) -> ok end, offset_ref => Ref},
            {ok, R} = osiris_log:init_data_reader({First, empty}, Conf),
            loop(R, Segs, 0)
    end,
    halt(0);
main(_) ->
    io:format(standard_error, "usage: osiris131-dump.escript STREAM_DIR~n", []),
    halt(2).

range(empty) -> empty;
range({F, L}) -> {obj, [{first, F}, {last, L}]}.

loop(R0, Segs, N) ->
    case catch osiris_log:read_chunk_parsed(R0, with_header) of
        {ok, H, Recs, R} ->
            #{chunk_id := Id, type := Ty, position := Pos} = H,
            File = segment_of(Id, Segs),
            out([{kind, chunk}, {n, N}, {file, list_to_binary(File)}, {position, Pos}, {chunk_id, Id}, {type, Ty},
                 {num_entries, maps:get(num_entries, H)}, {num_records, maps:get(num_records, H)},
                 {timestamp, maps:get(timestamp, H)}, {epoch, maps:get(epoch, H)}, {crc, maps:get(crc, H)},
                 {crc_match, true}, {data_size, maps:get(data_size, H)}, {trailer_size, maps:get(trailer_size, H)}]),
            [record(Ty, Id, File, Off, Data) || {Off, Data} <- Recs],
            loop(R, Segs, N + 1);
        {end_of_stream, _} ->
            out([{kind, stream_end}, {chunks, N}]);
        {'EXIT', {crc_validation_failure, {chunk_id, Id}}} ->
            out([{kind, chunk}, {n, N}, {chunk_id, Id}, {crc_match, false}]),
            out([{kind, stream_end}, {chunks, N + 1}, {stopped, <<"crc_validation_failure">>}]);
        Other ->
            out([{kind, stream_end}, {chunks, N}, {stopped, fmt(Other)}])
    end.

segment_of(Id, Segs) ->
    lists:last([S || S <- Segs, list_to_integer(filename:basename(S, ".segment")) =< Id]).

record(0, Id, File, Off, Data) when is_binary(Data) ->
    Base = [{kind, record}, {file, list_to_binary(File)}, {chunk_id, Id}, {offset, Off}, {size, byte_size(Data)}],
    case catch amqp10_framing:decode_bin(Data) of
        Sections when is_list(Sections) ->
            Body = iolist_to_binary([C || {'v1_0.data', C} <- Sections]),
            out(Base ++ [{sections, {list, [atom_to_binary(element(1, S), utf8) || S <- Sections]}},
                         {message_id, message_id(Sections)},
                         {body_size, byte_size(Body)},
                         {body_sha256, hex(crypto:hash(sha256, Body))},
                         {app_props, kv([C || {'v1_0.application_properties', C} <- Sections])},
                         {msg_annotations, kv([C || {'v1_0.message_annotations', C} <- Sections])},
                         {properties, case [S || S <- Sections, element(1, S) == 'v1_0.properties'] of
                                          [P] -> fmt(P);
                                          [] -> undefined
                                      end}]);
        Err ->
            out(Base ++ [{decode_error, fmt(Err)}])
    end;
record(_, Id, File, Off, Data) when is_binary(Data) ->
    out([{kind, record}, {file, list_to_binary(File)}, {chunk_id, Id}, {offset, Off}, {size, byte_size(Data)},
         {data_hex, hex(Data)}]);
record(_, Id, File, Off, Batch) ->
    out([{kind, sub_batch}, {file, list_to_binary(File)}, {chunk_id, Id}, {offset, Off}, {batch, fmt(Batch)}]).

message_id(Sections) ->
    case [S || S <- Sections, element(1, S) == 'v1_0.properties'] of
        [P] -> case element(2, P) of
                   {_, Id} when is_binary(Id) -> Id;
                   undefined -> <<>>;
                   Other -> fmt(Other)
               end;
        [] -> <<>>
    end.

kv([C]) -> {obj, [{fmt(K), fmt(V)} || {K, V} <- C]};
kv([]) -> {obj, []}.

fmt(T) -> unicode:characters_to_binary(io_lib:format("~0p", [T])).

hex(B) -> << <<(hexd(X bsr 4)), (hexd(X band 15))>> || <<X>> <= B >>.
hexd(D) when D < 10 -> $0 + D;
hexd(D) -> $a + D - 10.

%% a minimal JSON writer: {obj, [{K, V}]}, {list, [V]}, integers, binaries
%% (as strings), atoms (true/false/null as themselves, others as strings).
out(Fields) -> io:put_chars([json({obj, Fields}), $\n]).

json({obj, KVs}) ->
    [${, lists:join($,, [[json(key(K)), $:, json(V)] || {K, V} <- KVs]), $}];
json({list, Vs}) -> [$[, lists:join($,, [json(V) || V <- Vs]), $]];
json(true) -> <<"true">>;
json(false) -> <<"false">>;
json(null) -> <<"null">>;
json(undefined) -> <<"null">>;
json(A) when is_atom(A) -> json(atom_to_binary(A, utf8));
json(I) when is_integer(I) -> integer_to_binary(I);
json(B) when is_binary(B) -> [$", esc(B), $"].

key(K) when is_atom(K) -> atom_to_binary(K, utf8);
key(K) -> K.

esc(B) -> << <<(esc1(C))/binary>> || <<C/utf8>> <= B >>.
esc1($") -> <<"\\\"">>;
esc1($\\) -> <<"\\\\">>;
esc1(C) when C < 32 -> list_to_binary(io_lib:format("\\u~4.16.0b", [C]));
esc1(C) -> <<C/utf8>>.
