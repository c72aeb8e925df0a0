package rabbitmq

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	gen "github.com/storectl/storectl/internal/gen/rabbitmq"
	"github.com/storectl/storectl/internal/testutil"
	"github.com/storectl/storectl/pkg/scan"
)

// scanJoin runs Scan on one vhost dir with the join in memory (spill
// false: a budget no store here reaches) or spilled with runs of runLen
// records; it returns the result and the records handed to the callback.
func scanJoin(t *testing.T, ctx context.Context, spill bool, runLen int, root, dir string) (*scan.Result, []any) {
	t.Helper()
	res, recs, err := scanJoinErr(ctx, spill, runLen, root, dir)
	if err != nil {
		t.Fatal(err)
	}
	return res, recs
}

// joinJobs is the --jobs of scanJoin and verifyJoin: the spilled join's
// parts (TestSpilledJoinParts sets others).
var joinJobs = 2

func scanJoinErr(ctx context.Context, spill bool, runLen int, root, dir string) (*scan.Result, []any, error) {
	var recs []any
	opts := scan.Options{Jobs: joinJobs, Records: func(r any) error { recs = append(recs, r); return nil }}
	cfg := Config{Root: root, VHostDirs: []string{dir}, joinBudget: 1 << 40}
	if spill {
		// runsort's default fan-in, not joinFanIn: the many-runs store
		// below has merge passes (ScanVHost's tests merge in one).
		cfg.joinBudget, cfg.joinRun, cfg.joinFanIn = -1, runLen, 64
	}
	res, err := Scan(ctx, cfg, opts)
	return res, recs, err
}

// spillRuns counts the calls of a spill's test hook (joinHook,
// verifySpillHook: one a spilled join or verify, with its number of
// runs) and the most temp files open under tmp at a call.
type spillRuns struct{ calls, runs, fds int }

// hook sets *h to count into c (then runs after each count) until the
// returned restore is called.
func (c *spillRuns) hook(t *testing.T, tmp string, h *func(int), then func()) func() {
	old := *h
	*h = func(runs int) {
		c.calls++
		c.runs += runs
		c.fds = max(c.fds, testutil.OpenFDsUnder(t, tmp))
		if then != nil {
			then()
		}
	}
	return func() { *h = old }
}

// runSpilled runs do in a fresh temp dir with its spill's test hook
// counting (then runs at the hook), checks that it spilled once with temp
// files open and left none open, and returns what do returned. what names
// the run in the errors.
func runSpilled(t *testing.T, hook *func(int), then func(), what string, do func() (*scan.Result, error)) (*scan.Result, error) {
	t.Helper()
	tmp := withTemp(t)
	var c spillRuns
	defer c.hook(t, tmp, hook, then)()
	res, err := do()
	if c.calls != 1 || c.fds == 0 {
		t.Errorf("%d spills, %d temp files open at the spill: the %s did not spill", c.calls, c.fds, what)
	}
	if n := testutil.OpenFDsUnder(t, tmp); n != 0 {
		t.Errorf("%d temp files still open after the %s", n, what)
	}
	return res, err
}

// spillFailed says whether a run ended in an error (its own or the
// result's).
func spillFailed(res *scan.Result, err error) bool { return err != nil || res.Incomplete }

// removeLater returns a func that removes path (a test's hook calls it
// between a spill's two reads); path is written back when the test ends.
func removeLater(t *testing.T, path string) func() {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.WriteFile(path, b, 0o644) })
	return func() { os.Remove(path) }
}

// genSmallStore generates the 3 MiB store of small records the
// temp-files-after-error tests break: its root, what was generated and
// its vhost dir.
func genSmallStore(t *testing.T) (string, *gen.Summary, string) {
	t.Helper()
	root := t.TempDir()
	sum, err := gen.Generate(root, gen.Config{Seed: 7, Kind: gen.MC, TotalBytes: 3 << 20, FileLimit: 1 << 20,
		BodyMin: 100, BodyMax: 200})
	if err != nil {
		t.Fatal(err)
	}
	return root, sum, sum.VHostDir
}

// withTemp points the scan's temp files at a fresh dir.
func withTemp(t *testing.T) string {
	t.Helper()
	tmp := t.TempDir()
	scan.SetTempDir(tmp)
	t.Cleanup(func() { scan.SetTempDir("") }) // back to $TMPDIR (no test sets another)
	return tmp
}

// dropClean removes the clean-shutdown files of a vhost dir: the spilled
// join is for unclean stores (a clean one's index joins against the table).
func dropClean(t *testing.T, dir string) {
	t.Helper()
	for _, n := range []string{"clean.dot", "msg_store_index.ets", "file_summary.ets"} {
		if err := os.Remove(filepath.Join(dir, "msg_store_persistent", n)); err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
	}
}

// sameJoin checks that the spilled join (runs of runLen records) gives
// exactly the in-memory join's result and records, that it spilled, and
// that no temp file is left open after the scan.
func sameJoin(t *testing.T, root, dir string, runLen, minRuns int) {
	t.Helper()
	tmp := withTemp(t)
	var c spillRuns
	defer c.hook(t, tmp, &joinHook, nil)()
	want, wantRecs := scanJoin(t, context.Background(), false, 0, root, dir)
	if c.calls != 0 {
		t.Fatalf("the in-memory scan spilled (%d joins)", c.calls)
	}
	got, gotRecs := scanJoin(t, context.Background(), true, runLen, root, dir)
	a, _ := json.Marshal([]any{want, wantRecs})
	b, _ := json.Marshal([]any{got, gotRecs})
	if string(a) != string(b) {
		t.Errorf("spilled join differs from the in-memory one:\nmemory %.3000s\nspilled %.3000s", a, b)
	}
	if len(want.Findings) == 0 || len(wantRecs) == 0 {
		t.Errorf("nothing compared: %d findings, %d records", len(want.Findings), len(wantRecs))
	}
	if c.calls != 1 || c.runs < minRuns {
		t.Errorf("spilled scan: %d joins, %d record runs; want 1 join of at least %d runs", c.calls, c.runs, minRuns)
	}
	if c.fds == 0 {
		t.Error("no temp file open during the join: it did not spill to the temp dir")
	}
	if n := testutil.OpenFDsUnder(t, tmp); n != 0 {
		t.Errorf("%d temp files still open after the scan", n)
	}
	t.Logf("%d findings, %d records, %d record runs, %d temp files open at the join", len(want.Findings), len(wantRecs), c.runs, c.fds)
}

// TestSpilledJoinSameAsMemory: on every RabbitMQ fixture dataset (the
// clean-shutdown ones also without their clean files, as the join spills
// only for unclean stores), on a generated store with holes, unreferenced
// records and a deleted file (message-missing findings), and on a
// generated store of small records whose runs of 1,000 records make
// dozens of runs and several merge passes, Scan gives the same result and
// records with the join spilled as in memory, and leaves no temp file
// open.
func TestSpilledJoinSameAsMemory(t *testing.T) {
	for _, d := range datasets {
		t.Run(d.kind+"/"+d.name, func(t *testing.T) {
			root := testutil.Untar(t, testutil.Testdata(d.kind, "datasets", d.name+".tar.gz"))
			dir := filepath.Join(root, d.node, "msg_stores", "vhosts", vhostHash)
			dropClean(t, dir)
			sameJoin(t, root, dir, 3, 2)
		})
	}
	t.Run("generated-deleted-file", func(t *testing.T) {
		root, dir := genDeletedFile(t)
		sameJoin(t, root, dir, 17, 2)
	})
	t.Run("generated-many-runs", func(t *testing.T) {
		root := t.TempDir()
		sum, err := gen.Generate(root, gen.Config{Seed: 5, Kind: gen.MC, TotalBytes: 8 << 20, FileLimit: 1 << 20,
			BodyMin: 100, BodyMax: 200, UnrefEvery: 9, HoleEvery: 11})
		if err != nil {
			t.Fatal(err)
		}
		// 64 sources at most are merged at once: past that, merge passes.
		sameJoin(t, root, sum.VHostDir, 300, 65)
	})
}

// TestSpilledJoinParts: the spilled join merges its key ranges on --jobs
// goroutines (idCuts); with one part, with more parts than the scan has
// files and with parts that cut the ids unevenly, Scan and Verify give
// the in-memory result (the parts' queue-name sets, missing ids and,
// for verify, their sections of the referenced ids put together), and
// temp files are gone afterwards.
func TestSpilledJoinParts(t *testing.T) {
	root, dir := genDeletedFile(t)
	defer func(j int) { joinJobs = j }(joinJobs)
	for _, jobs := range []int{1, 3, 8} {
		joinJobs = jobs
		t.Run(fmt.Sprintf("jobs-%d", jobs), func(t *testing.T) {
			sameJoin(t, root, dir, 17, 2)
			sameVerify(t, root, dir, "", 17, 2)
		})
	}
}

// TestIDCuts: the cuts ascend and split the keys into equal ranges; the
// parts follow --jobs up to maxJoinParts.
func TestIDCuts(t *testing.T) {
	for jobs, want := range map[int]int{0: 1, 1: 1, 2: 2, 8: 8, 64: maxJoinParts} {
		if got := joinParts(jobs); got != want {
			t.Errorf("--jobs %d: %d parts, want %d", jobs, got, want)
		}
	}
	if c := idCuts(1); c != nil {
		t.Fatalf("one part cut at %v", c)
	}
	for _, n := range []int{2, 3, 8} {
		c := idCuts(n)
		if len(c) != n-1 {
			t.Fatalf("%d parts: %d cuts", n, len(c))
		}
		w := uint64(math.MaxUint64 / uint64(n))
		for p, k := range c {
			if k != uint64(p+1)*w || (p > 0 && k <= c[p-1]) {
				t.Fatalf("%d parts: cuts %v", n, c)
			}
		}
	}
}

// TestSpilledJoinTempFilesAfterError: a spilled scan that is cancelled
// after its prepass, one whose .rdq vanishes between its two walks, and
// one whose temp dir cannot be written all end with an error in the
// result and no temp file left open.
func TestSpilledJoinTempFilesAfterError(t *testing.T) {
	root, sum, dir := genSmallStore(t)
	run := func(t *testing.T, ctx context.Context, then func()) (*scan.Result, error) {
		t.Helper()
		return runSpilled(t, &joinHook, then, "scan", func() (*scan.Result, error) {
			res, _, err := scanJoinErr(ctx, true, 100, root, dir)
			return res, err
		})
	}
	t.Run("cancelled", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		if res, err := run(t, ctx, cancel); !spillFailed(res, err) {
			t.Errorf("a cancelled scan is complete: %+v", res.Errors)
		}
	})
	t.Run("file-vanished", func(t *testing.T) {
		vanish := removeLater(t, sum.Files[len(sum.Files)/2])
		res, err := run(t, context.Background(), vanish)
		if err != nil {
			t.Fatal(err)
		}
		if !res.Incomplete || !strings.Contains(strings.Join(res.Errors, "\n"), "could be read before") {
			t.Errorf("want the vanished file's error, got %v", res.Errors)
		}
	})
	t.Run("temp-dir-unwritable", func(t *testing.T) {
		scan.SetTempDir(filepath.Join(t.TempDir(), "absent"))
		defer scan.SetTempDir("") // back to $TMPDIR (no test sets another)
		if res, _, err := scanJoinErr(context.Background(), true, 100, root, dir); !spillFailed(res, err) {
			t.Errorf("a scan that could not spill is complete")
		}
	})
}
