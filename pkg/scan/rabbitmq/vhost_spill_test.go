package rabbitmq

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	gen "github.com/storectl/storectl/internal/gen/rabbitmq"
	"github.com/storectl/storectl/internal/testutil"
	"github.com/storectl/storectl/pkg/scan"
)

// scanVHostJoin runs ScanVHost (what truncate, rebuild-index, harden and
// salvage scan with) on dir, the join in memory (spill false: a budget no
// store here reaches) or spilled with runs of runLen records. It returns
// the result and every file as EachFile was handed it (records with
// their statuses, references and first copies, gaps, hazards), as JSON.
func scanVHostJoin(ctx context.Context, spill bool, runLen int, root, dir string) (string, error) {
	var kept []FileScan
	o := VHostOptions{Options: scan.Options{Jobs: 2}, join: joinSpill{budget: 1 << 40},
		EachFile: func(v *VHostScan, f *FileScan) error {
			c := *f
			c.Hazards = slices.Clone(f.Hazards)
			kept = append(kept, c)
			return nil
		}}
	if spill {
		o.join = joinSpill{budget: -1, runLen: runLen}
	}
	v, err := ScanVHost(ctx, root, dir, o)
	if err != nil {
		return "", err
	}
	for _, f := range v.Files {
		if f.Err != nil {
			return "", f.Err
		}
	}
	b, err := json.Marshal([]any{v.Dir, v.VHost, v.RefsKnown, v.Files, v.Lost, v.Clean, v.Findings, v.Layout, v.Assumed, kept})
	return string(b), err
}

// sameVHostJoin checks that ScanVHost gives exactly the same result and
// files with its join spilled (runs of runLen records, at least minRuns
// of them) as in memory, and that no temp file is left open. A vhost
// whose queue indexes reference nothing has nothing to join: it must not
// spill. It returns whether the scan spilled and found records.
func sameVHostJoin(t *testing.T, root, dir string, runLen, minRuns int) (spilled, records bool) {
	t.Helper()
	refs := 0
	if _, err := os.Stat(filepath.Join(dir, "queues")); err == nil {
		var mu sync.Mutex
		if _, err := ReadVHostQueuesRefsFunc(dir, func(_ *QueueDir, r []QueueRef) { mu.Lock(); refs += len(r); mu.Unlock() }); err != nil {
			t.Fatal(err)
		}
	}
	tmp := withTemp(t)
	var c spillRuns
	defer c.hook(t, tmp, &joinHook, nil)()
	want, err := scanVHostJoin(context.Background(), false, 0, root, dir)
	if err != nil {
		t.Fatal(err)
	}
	if c.calls != 0 {
		t.Fatalf("the in-memory scan spilled (%d joins)", c.calls)
	}
	got, err := scanVHostJoin(context.Background(), true, runLen, root, dir)
	if err != nil {
		t.Fatal(err)
	}
	if want != got {
		i := 0
		for i < min(len(want), len(got)) && want[i] == got[i] {
			i++
		}
		from := max(0, i-200)
		t.Errorf("spilled join differs from the in-memory one at byte %d:\nmemory  ...%.600s\nspilled ...%.600s", i, want[from:], got[from:])
	}
	if n := testutil.OpenFDsUnder(t, tmp); n != 0 {
		t.Errorf("%d temp files still open after the scan", n)
	}
	records = strings.Contains(want, `"Status":`)
	if strings.Contains(dir, "generated-duplicates") && !strings.Contains(want, `"Status":"duplicate"`) {
		t.Error("no duplicate record compared")
	}
	if refs == 0 {
		if c.calls != 0 {
			t.Errorf("no queue references, yet %d joins", c.calls)
		}
		return false, records
	}
	if c.calls != 1 || c.runs < minRuns {
		t.Errorf("spilled scan of %d references: %d joins, %d record runs; want 1 join of at least %d runs", refs, c.calls, c.runs, minRuns)
	}
	if c.fds == 0 {
		t.Error("no temp file open during the join: it did not spill to the temp dir")
	}
	return c.calls == 1, records
}

// fixtureVHostDirs unpacks every RabbitMQ dataset under testdata and
// returns their vhost dirs without their clean-shutdown files (the join
// spills only for unclean stores). It fails when there are few.
func fixtureVHostDirs(t *testing.T) map[string]fixtureVHost {
	t.Helper()
	tars, err := filepath.Glob(testutil.Testdata("rabbitmq*", "datasets", "*.tar.gz"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]fixtureVHost{}
	for _, tar := range tars {
		root := testutil.Untar(t, tar)
		name := filepath.Base(filepath.Dir(filepath.Dir(tar))) + "/" + strings.TrimSuffix(filepath.Base(tar), ".tar.gz")
		_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil || !d.IsDir() || d.Name() != "msg_store_persistent" {
				return err
			}
			dir := filepath.Dir(p)
			rel, _ := filepath.Rel(root, dir)
			dropClean(t, dir)
			out[name+"/"+rel] = fixtureVHost{root, dir}
			return filepath.SkipDir
		})
	}
	if len(tars) < 5 || len(out) < len(tars)-1 {
		t.Fatalf("%d datasets, %d vhost dirs under testdata: the fixtures are missing", len(tars), len(out))
	}
	return out
}

type fixtureVHost struct{ root, dir string }

// TestScanVHostSpilledSameAsMemory: on every vhost dir of every RabbitMQ
// fixture dataset under testdata (unclean: their clean files removed;
// those whose queues reference nothing must not spill), on
// a generated store with holes, unreferenced records and a deleted file
// (message-missing findings), and on a generated store of small records
// whose 300-record runs are merged in one (joinFanIn), ScanVHost (the
// scan truncate, rebuild-index, harden and salvage plan from) gives the
// same result and hands the same files and records to EachFile with its
// join spilled as in memory, and leaves no temp file open.
func TestScanVHostSpilledSameAsMemory(t *testing.T) {
	dirs := fixtureVHostDirs(t)
	names := make([]string, 0, len(dirs))
	for n := range dirs {
		names = append(names, n)
	}
	slices.Sort(names)
	spilled := 0
	for _, n := range names {
		t.Run(n, func(t *testing.T) {
			// The smallest fixtures hold 3 records: one run.
			if s, r := sameVHostJoin(t, dirs[n].root, dirs[n].dir, 3, 1); s && r {
				spilled++
			}
		})
	}
	if spilled < 5 {
		t.Errorf("only %d fixture vhosts spilled a join with records", spilled)
	}
	t.Run("generated-deleted-file", func(t *testing.T) {
		root, dir := genDeletedFile(t)
		if s, r := sameVHostJoin(t, root, dir, 17, 2); !s || !r {
			t.Errorf("spilled %v, records %v", s, r)
		}
	})
	t.Run("generated-duplicates", func(t *testing.T) {
		// Copies of records within a file, in a later file and in a new
		// last file: duplicates whose first copy the join must name.
		root := t.TempDir()
		sum, err := gen.Generate(root, gen.Config{Seed: 9, Kind: gen.MC, TotalBytes: 4 << 20, FileLimit: 1 << 20,
			BodyMin: 100, BodyMax: 200, UnrefEvery: 7})
		if err != nil {
			t.Fatal(err)
		}
		f0 := readFile(t, sum.Files[0])
		f2 := readFile(t, sum.Files[2])
		half := f0[:len(f0)/2]
		writeFile(t, sum.Files[0], append(append([]byte{}, f0...), half...))
		writeFile(t, sum.Files[2], append(append([]byte{}, f2...), half...))
		writeFile(t, filepath.Join(filepath.Dir(sum.Files[0]), fmt.Sprintf("%d.rdq", len(sum.Files)+3)), append(append([]byte{}, f2...), f0...))
		if s, r := sameVHostJoin(t, root, sum.VHostDir, 50, 10); !s || !r {
			t.Errorf("spilled %v, records %v", s, r)
		}
	})
	t.Run("generated-many-runs", func(t *testing.T) {
		root := t.TempDir()
		sum, err := gen.Generate(root, gen.Config{Seed: 5, Kind: gen.MC, TotalBytes: 8 << 20, FileLimit: 1 << 20,
			BodyMin: 100, BodyMax: 200, UnrefEvery: 9, HoleEvery: 11})
		if err != nil {
			t.Fatal(err)
		}
		if s, r := sameVHostJoin(t, root, sum.VHostDir, 300, 65); !s || !r {
			t.Errorf("spilled %v, records %v", s, r)
		}
	})
}

// TestScanVHostSpilledTempFilesAfterError: a spilled ScanVHost that runs
// to its end, one cancelled after its prepass, one whose .rdq vanishes
// between its two walks, one whose EachFile fails and one whose temp dir
// cannot be written leave no temp file open; all but the first end in an
// error.
func TestScanVHostSpilledTempFilesAfterError(t *testing.T) {
	root, sum, dir := genSmallStore(t)
	errStop := errors.New("stop")
	run := func(t *testing.T, ctx context.Context, then func(), each func(*FileScan) error) error {
		t.Helper()
		tmp := withTemp(t)
		var c spillRuns
		defer c.hook(t, tmp, &joinHook, then)()
		o := VHostOptions{Options: scan.Options{Jobs: 2}, join: joinSpill{budget: -1, runLen: 100},
			EachFile: func(_ *VHostScan, f *FileScan) error {
				if each != nil {
					return each(f)
				}
				return nil
			}}
		v, err := ScanVHost(ctx, root, dir, o)
		if c.calls != 1 || c.fds == 0 {
			t.Errorf("%d joins, %d temp files open at the join: the scan did not spill", c.calls, c.fds)
		}
		if n := testutil.OpenFDsUnder(t, tmp); n != 0 {
			t.Errorf("%d temp files still open after the scan", n)
		}
		if err == nil {
			for _, f := range v.Files {
				err = errors.Join(err, f.Err)
			}
		}
		return err
	}
	t.Run("complete", func(t *testing.T) {
		if err := run(t, context.Background(), nil, nil); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("cancelled", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		if err := run(t, ctx, cancel, nil); err == nil {
			t.Error("a cancelled scan ended without an error")
		}
	})
	t.Run("file-vanished", func(t *testing.T) {
		vanish := removeLater(t, sum.Files[len(sum.Files)/2])
		if err := run(t, context.Background(), vanish, nil); err == nil || !strings.Contains(err.Error(), "could be read before") {
			t.Errorf("want the vanished file's error, got %v", err)
		}
	})
	t.Run("each-file-error", func(t *testing.T) {
		n := 0
		err := run(t, context.Background(), nil, func(*FileScan) error {
			if n++; n == 2 {
				return errStop
			}
			return nil
		})
		if !errors.Is(err, errStop) {
			t.Errorf("want EachFile's error, got %v", err)
		}
	})
	t.Run("temp-dir-unwritable", func(t *testing.T) {
		scan.SetTempDir(filepath.Join(t.TempDir(), "absent"))
		defer scan.SetTempDir("") // back to $TMPDIR (no test sets another)
		o := VHostOptions{join: joinSpill{budget: -1, runLen: 100}, EachFile: func(*VHostScan, *FileScan) error { return nil }}
		if _, err := ScanVHost(context.Background(), root, dir, o); err == nil {
			t.Error("a scan that could not spill ended without an error")
		}
	})
}
