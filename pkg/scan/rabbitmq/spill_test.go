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
// file (spillAll, the test-only budget of one victim), lean Scan and
// Verify give exactly the findings, queue lines and record lines of the
// in-memory (detailed) ones on every fixture dataset and on a generated
// store whose zero holes give every file a long victim list; while they
// run the temp dir ($TMPDIR) stays empty (the file is unlinked at once),
// and once they return no descriptor of the file is left open, also when
// the run stops on an error (a cancelled context, an EachFile error).
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
			// Scan: the detailed result (nothing spilled) against the lean
			// one, records included; the records callback sees the file
			// open once an earlier file's lists were spilled.
			open := 0
			var want, got []any
			wantRes := scanWith(t, false, st.root, st.dir, &want)
			gone(t, "after the detailed scan")
			gotRes := scanWith(t, true, st.root, st.dir, &got)
			// One job: a file made by another worker is in the dir for the
			// instant between its create and its unlink.
			opts := scan.Options{Jobs: 1, Records: func(any) error {
				open = max(open, testutil.OpenFiles(t, victimTemp))
				if ents, _ := os.ReadDir(tmp); len(ents) != 0 {
					t.Errorf("the temp dir holds %s during the scan", ents[0].Name())
				}
				return nil
			}}
			if _, err := Scan(context.Background(), Config{Root: st.root, VHostDirs: []string{st.dir}}, opts); err != nil {
				t.Fatal(err)
			}
			a, _ := json.Marshal([]any{wantRes, want})
			b, _ := json.Marshal([]any{gotRes, got})
			if string(a) != string(b) {
				t.Errorf("spilled scan differs from the in-memory one:\n%.1500s\n%.1500s", a, b)
			}
			gone(t, "after the scan")
			f, q, _ := sameVerify(t, st.root, st.dir, "")
			gone(t, "after verify")
			if open > 0 {
				spilledAny = true
			}
			t.Logf("%d findings, %d queues the same; victim temp file open during the scan: %v", f, q, open > 0)
			if open == 0 && st.root == groot {
				t.Fatal("the generated store spilled nothing: the spill is not tested")
			}
		})
	}
	if !spilledAny {
		t.Fatal("no store spilled a victim list")
	}
	t.Run("errors", func(t *testing.T) {
		// A run cancelled once lists are spilled: Scan and Verify stop
		// with the context's error and leave no file open.
		for _, verify := range []bool{false, true} {
			ctx, cancel := context.WithCancel(context.Background())
			opts := scan.Options{Jobs: 2, Records: func(any) error {
				if testutil.OpenFiles(t, victimTemp) > 0 {
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
