package rabbitmq

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/storectl/storectl/pkg/format/etf"

	"github.com/storectl/storectl/internal/testutil"
	rfmt "github.com/storectl/storectl/pkg/format/rabbitmq"
)

// rbLoadEscript loads each .ets file given with ets:file2tab (verify on,
// as rabbit_msg_store loads them) and prints the table's type, keypos and
// size, then one line per object, with the msg id in hex so that the
// lines compare as text.
const rbLoadEscript = `#!/usr/bin/env escript
-mode(compile).
main(Files) ->
    lists:foreach(fun load/1, Files).

load(F) ->
    case ets:file2tab(F, [{verify, true}]) of
        {ok, T} ->
            io:format("table ~s ~w ~w ~w~n", [filename:basename(F), ets:info(T, type), ets:info(T, keypos), ets:info(T, size)]),
            lists:foreach(fun obj/1, ets:tab2list(T));
        {error, R} ->
            io:format("error ~s ~p~n", [F, R]),
            halt(1)
    end.

obj({msg_location, Id, Ref, File, Off, Size}) ->
    io:format("loc ~s ~w ~w ~w ~w~n", [[io_lib:format("~2.16.0b", [B]) || <<B>> <= Id], Ref, File, Off, Size]);
obj({file_summary, File, Valid, L, R, Size, Locked, Readers}) ->
    io:format("sum ~w ~w ~w ~w ~w ~w ~w~n", [File, Valid, L, R, Size, Locked, Readers]);
obj(O) ->
    io:format("other ~p~n", [O]).
`

// rbErlLoad runs the escript on files and returns, per file in order,
// its table line and its object lines, sorted (ets:tab2list of a set has
// no meaningful order).
func rbErlLoad(t *testing.T, escript string, files ...string) (heads []string, objs [][]string) {
	t.Helper()
	out, err := exec.Command(escript, files...).CombinedOutput()
	if err != nil {
		t.Fatalf("escript %v: %v\n%s", files, err, out)
	}
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if strings.HasPrefix(l, "table ") {
			heads, objs = append(heads, l), append(objs, []string{})
			continue
		}
		if len(objs) == 0 {
			t.Fatalf("escript printed %q before any table", l)
		}
		objs[len(objs)-1] = append(objs[len(objs)-1], l)
	}
	for _, v := range objs {
		sort.Strings(v)
	}
	if len(heads) != len(files)-1 { // files[0] is the script
		t.Fatalf("escript printed %d tables for %d files:\n%s", len(heads), len(files)-1, out)
	}
	return heads, objs
}

// rbW formats a summary's unused field as ~w would.
func rbW(t etf.Term) string {
	switch v := rbTerm(t).(type) {
	case etf.Atom:
		return string(v)
	default:
		return fmt.Sprint(v)
	}
}

// (d): the real Erlang runtime loads the rebuilt files with ets:file2tab
// and sees exactly the objects of the broker's own dumps, which it also
// loads. Skipped without escript (Debian erlang-base; .ci/run installs it).
func TestRebuildLoadsInErlang(t *testing.T) {
	escript := testutil.RequireEscript(t)
	script := filepath.Join(t.TempDir(), "load.escript")
	if err := os.WriteFile(script, []byte(rbLoadEscript), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, fx := range rbFixtures {
		root, store, idx, sum := rbUnpack(t, fx)
		broker := t.TempDir()
		for name, b := range map[string][]byte{rbIndexFile: idx, rbSummaryFile: sum} {
			if err := os.WriteFile(filepath.Join(broker, name), b, 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Remove(filepath.Join(store, name)); err != nil {
				t.Fatal(err)
			}
		}
		p, _ := rbPlan(t, root)
		var rebuilt []string
		for _, n := range []string{rbIndexFile, rbSummaryFile} {
			for _, a := range p.Actions {
				if filepath.Base(a.Path) == n {
					rebuilt = append(rebuilt, a.Source)
				}
			}
		}
		if len(rebuilt) != 2 {
			t.Fatalf("%s: %d staged files, want 2", fx, len(rebuilt))
		}
		// One VM loads the two rebuilt files, then the broker's two.
		heads, objs := rbErlLoad(t, escript, script, rebuilt[0], rebuilt[1],
			filepath.Join(broker, rbIndexFile), filepath.Join(broker, rbSummaryFile))

		// What the Go decoder reads from the broker's files, in the same
		// text: the Erlang view must agree with it object by object.
		locs, _ := rfmt.ReadMsgStoreIndex(idx)
		sums, _ := rfmt.ReadFileSummary(sum)
		var goIdx, goSum []string
		for _, l := range locs {
			goIdx = append(goIdx, fmt.Sprintf("loc %x %d %d %d %d", l.MsgID, l.RefCount, l.File, l.Offset, l.TotalSize))
		}
		for _, s := range sums {
			goSum = append(goSum, fmt.Sprintf("sum %d %d %s %s %d %v %s", s.File, s.ValidTotalSize, rbW(s.Left), rbW(s.Right), s.FileSize, s.Locked, rbW(s.Readers)))
		}
		sort.Strings(goIdx)
		sort.Strings(goSum)
		wantHead := []string{fmt.Sprintf("table %s set 2 %d", rbIndexFile, len(locs)), fmt.Sprintf("table %s ordered_set 2 %d", rbSummaryFile, len(sums))}
		wantObjs := [][]string{goIdx, goSum}
		checked, bad := 0, 0
		for i := range heads {
			what := map[bool]string{true: "rebuilt", false: "broker"}[i < 2]
			if heads[i] != wantHead[i%2] {
				t.Errorf("%s: %s: erl says %q, want %q", fx, what, heads[i], wantHead[i%2])
			}
			if strings.Join(objs[i], "\n") != strings.Join(wantObjs[i%2], "\n") {
				bad++
				t.Errorf("%s: %s %s: erl loaded objects differ from the broker's dump", fx, what, wantHead[i%2])
			}
			checked += len(objs[i])
		}
		t.Logf("%s: ets:file2tab loaded %d objects of the rebuilt and the broker's dumps, %d table mismatches", fx, checked, bad)
	}
}
