package rabbitmq

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"

	gen "github.com/storectl/storectl/internal/gen/rabbitmq"
	"github.com/storectl/storectl/internal/testutil"
	"github.com/storectl/storectl/pkg/scan"
)

// victimTemp is the name every victim spill file has (newScanner's
// pattern); the files are unlinked, so only their descriptors show.
const victimTemp = "storectl-victims-"

// TestVictimSpillSameAndGone: with every victim list spilled to the temp
// file (spillAll, the test-only budget of one victim), Scan and
// Verify give exactly the findings, queue lines and record lines of the
// in-memory ones (spillNone) on every fixture dataset and on a generated
// store whose zero holes give every file a long victim list; while they
// run the temp dir ($TMPDIR) stays empty (the file is unlinked at once),
// and once they return no descriptor of the file is left open, also when
// the run stops on an error (a cancelled context, an EachFile error).
// Scan, whose released files' victims nobody reads, writes none
// (scanner.dropVictims): only Verify opens the file.
func TestVictimSpillSameAndGone(t *testing.T) {
	defer spillAll()()
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	gone := func(t *testing.T, when string) {
		t.Helper()
		if n := testutil.OpenFiles(t, victimTemp); n != 0 {
			t.Fatalf("%s: %d victim temp files still open", when, n)
		}
		if ents, _ := os.ReadDir(tmp); len(ents) != 0 {
			t.Fatalf("%s: the temp dir holds %d entries", when, len(ents))
		}
	}
	type store struct{ name, root, dir string }
	var stores []store
	for _, d := range datasets {
		root := testutil.Untar(t, testutil.Testdata(d.kind, "datasets", d.name+".tar.gz"))
		stores = append(stores, store{d.kind + "/" + d.name, root, filepath.Join(root, d.node, "msg_stores", "vhosts", vhostHash)})
	}
	groot := t.TempDir()
	sum, err := gen.Generate(groot, gen.Config{Seed: 3, Kind: gen.BasicMessage, TotalBytes: 4 << 20,
		FileLimit: 512 << 10, HoleEvery: 50, UnrefEvery: 20})
	if err != nil {
		t.Fatal(err)
	}
	stores = append(stores, store{"generated zero holes", groot, sum.VHostDir})
	spilledAny := false
	for _, st := range stores {
		t.Run(st.name, func(t *testing.T) {
			// Scan and Verify with nothing spilled against every list
			// spilled, records included; Verify's records callback sees
			// the file open once an earlier file's lists were spilled,
			// Scan's never does.
			open, scanOpen := 0, 0
			var want, got []any
			undo := spillNone()
			wantRes := scanWith(t, st.root, st.dir, &want)
			wantVerify := verifyWith(t, st.root, st.dir, "")
			undo()
			gone(t, "after the in-memory scan")
			gotRes := scanWith(t, st.root, st.dir, &got)
			// One job: a file made by another worker is in the dir for the
			// instant between its create and its unlink.
			watch := func(open *int) scan.Options {
				return scan.Options{Jobs: 1, Records: func(any) error {
					*open = max(*open, testutil.OpenFiles(t, victimTemp))
					if ents, _ := os.ReadDir(tmp); len(ents) != 0 {
						t.Errorf("the temp dir holds %s during the run", ents[0].Name())
					}
					return nil
				}}
			}
			cfg := Config{Root: st.root, VHostDirs: []string{st.dir}}
			if _, err := Scan(context.Background(), cfg, watch(&scanOpen)); err != nil {
				t.Fatal(err)
			}
			if scanOpen != 0 {
				t.Errorf("Scan opened %d victim temp files: it reads no released file's victims", scanOpen)
			}
			if _, err := Verify(context.Background(), cfg, watch(&open)); err != nil {
				t.Fatal(err)
			}
			gone(t, "after the watched verify")
			a, _ := json.Marshal([]any{wantRes, want})
			b, _ := json.Marshal([]any{gotRes, got})
			if string(a) != string(b) {
				t.Errorf("spilled scan differs from the in-memory one:\n%.1500s\n%.1500s", a, b)
			}
			gone(t, "after the scan")
			gotVerify := verifyWith(t, st.root, st.dir, "")
			a, _ = json.Marshal(wantVerify)
			b, _ = json.Marshal(gotVerify)
			if string(a) != string(b) {
				t.Errorf("spilled verify differs from the in-memory one:\n%.1500s\n%.1500s", a, b)
			}
			f, q := len(wantVerify.Findings), len(wantVerify.Queues)
			gone(t, "after verify")
			if open > 0 {
				spilledAny = true
			}
			t.Logf("%d findings, %d queues the same; victim temp file open during verify: %v", f, q, open > 0)
			if open == 0 && st.root == groot {
				t.Fatal("the generated store spilled nothing: the spill is not tested")
			}
		})
	}
	if !spilledAny {
		t.Fatal("no store spilled a victim list")
	}
	t.Run("errors", func(t *testing.T) {
		// A run cancelled once lists are spilled (Verify) or a file was
		// released (Scan, which spills none): both stop with the
		// context's error and leave no file open.
		for _, verify := range []bool{false, true} {
			ctx, cancel := context.WithCancel(context.Background())
			recs := 0
			opts := scan.Options{Jobs: 2, Records: func(any) error {
				if recs++; testutil.OpenFiles(t, victimTemp) > 0 || (!verify && recs > 10) {
					cancel()
				}
				return nil
			}}
			cfg := Config{Root: groot, VHostDirs: []string{sum.VHostDir}}
			var err error
			if verify {
				_, err = Verify(ctx, cfg, opts)
			} else {
				_, err = Scan(ctx, cfg, opts)
			}
			cancel()
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("verify %v: cancelled run returned %v", verify, err)
			}
			gone(t, "after a cancelled run")
		}
		// A writer's EachFile that fails part way.
		boom := errors.New("boom")
		n := 0
		_, err := ScanVHost(context.Background(), groot, sum.VHostDir, VHostOptions{EachFile: func(*VHostScan, *FileScan) error {
			if n++; n == 3 {
				return boom
			}
			return nil
		}})
		if !errors.Is(err, boom) {
			t.Fatalf("EachFile error: %v", err)
		}
		gone(t, "after an EachFile error")
	})
}

// TestQueueLineSpillSame: with every queue line spilled (queueSpillMin
// 0, the test-only budget), Verify's lines read back from the temp file
// encode exactly as the in-memory lines do, in the same order, on every
// fixture dataset and on a generated store of 300 queues; the result's
// Close closes the file (no descriptor left), and a line read after it
// is an error, not a silent empty line.
func TestQueueLineSpillSame(t *testing.T) {
	const queueTemp = "storectl-queues-"
	type store struct{ name, root, dir string }
	var stores []store
	for _, d := range datasets {
		root := testutil.Untar(t, testutil.Testdata(d.kind, "datasets", d.name+".tar.gz"))
		stores = append(stores, store{d.kind + "/" + d.name, root, filepath.Join(root, d.node, "msg_stores", "vhosts", vhostHash)})
	}
	groot := t.TempDir()
	sum, err := gen.Generate(groot, gen.Config{Seed: 4, Kind: gen.BasicMessage, TotalBytes: 2 << 20,
		FileLimit: 512 << 10, HoleEvery: 50, Queues: 300})
	if err != nil {
		t.Fatal(err)
	}
	stores = append(stores, store{"generated 300 queues", groot, sum.VHostDir})
	lines := func(res *scan.Result) []string {
		var out []string
		for _, q := range res.Queues {
			b, _ := json.Marshal(q)
			out = append(out, string(b))
		}
		for _, q := range res.QueueLines {
			b, err := json.Marshal(q)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, string(b))
		}
		return out
	}
	for _, st := range stores {
		cfg := Config{Root: st.root, VHostDirs: []string{st.dir}}
		mem, err := Verify(context.Background(), cfg, scan.Options{Jobs: 2})
		if err != nil {
			t.Fatal(err)
		}
		old := queueSpillMin
		queueSpillMin = 0
		sp, err := Verify(context.Background(), cfg, scan.Options{Jobs: 2})
		queueSpillMin = old
		if err != nil {
			t.Fatal(err)
		}
		a, b := lines(mem), lines(sp)
		if len(a) == 0 || len(sp.Queues) != 0 || len(sp.QueueLines) != len(a) || testutil.OpenFiles(t, queueTemp) != 1 {
			t.Fatalf("%s: %d lines in memory; spilled run: %d in memory, %d spilled, %d temp files open",
				st.name, len(a), len(sp.Queues), len(sp.QueueLines), testutil.OpenFiles(t, queueTemp))
		}
		if enc := func(l []string) string { s, _ := json.Marshal(l); return string(s) }; enc(a) != enc(b) {
			t.Errorf("%s: spilled queue lines differ:\n%.1500s\n%.1500s", st.name, enc(a), enc(b))
		}
		for i, q := range sp.QueueLines {
			if sq, ok := q.(*spilledQueue); ok {
				back, err := sq.queue()
				if err != nil {
					t.Fatal(err)
				}
				if j, _ := json.Marshal(back); string(j) != a[i] {
					t.Errorf("%s: line %d decodes to %s, want %s", st.name, i, j, a[i])
				}
			}
		}
		if err := sp.Close(); err != nil {
			t.Fatal(err)
		}
		if n := testutil.OpenFiles(t, queueTemp); n != 0 {
			t.Fatalf("%s: %d queue temp files open after Close", st.name, n)
		}
		if _, err := json.Marshal(sp.QueueLines[0]); err == nil {
			t.Fatalf("%s: a spilled line read after Close", st.name)
		}
		t.Logf("%s: %d queue lines the same spilled", st.name, len(a))
	}
}
