package rabbitmq

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	gen "github.com/storectl/storectl/internal/gen/rabbitmq"
	"github.com/storectl/storectl/internal/testutil"
	"github.com/storectl/storectl/pkg/scan"
)

// verifyJoin runs Verify on one vhost dir with the join in memory (spill
// false: a budget no store here reaches) or spilled with runs of runLen
// records, at --jobs joinJobs; records says whether the record lines are asked
// for too. It returns the result and the record lines.
func verifyJoin(ctx context.Context, spill bool, runLen int, root, dir, ver string, records bool) (*scan.Result, []any, error) {
	var recs []any
	opts := scan.Options{Jobs: joinJobs}
	if records {
		opts.Records = func(r any) error { recs = append(recs, r); return nil }
	}
	cfg := Config{Root: root, VHostDirs: []string{dir}, BrokerVersion: ver, joinBudget: 1 << 40}
	if spill {
		// runsort's default fan-in, not joinFanIn: the many-runs store
		// has merge passes.
		cfg.joinBudget, cfg.joinRun, cfg.joinFanIn = -1, runLen, 64
	}
	res, err := Verify(ctx, cfg, opts)
	return res, recs, err
}

// sameVerify checks that Verify with its join spilled (runs of runLen
// records) gives exactly the in-memory verify's result and record lines
// (with --broker-version ver, with and without record lines), that it
// spilled, and that no temp file is left open after it. It returns the
// in-memory result.
func sameVerify(t *testing.T, root, dir, ver string, runLen, minRuns int) *scan.Result {
	t.Helper()
	var first *scan.Result
	for _, records := range []bool{false, true} {
		tmp := withTemp(t)
		var c spillRuns
		restore := c.hook(t, tmp, &verifySpillHook, nil)
		want, wantRecs, err := verifyJoin(context.Background(), false, 0, root, dir, ver, records)
		if err != nil {
			t.Fatal(err)
		}
		if c.calls != 0 {
			t.Fatalf("the in-memory verify spilled (%d)", c.calls)
		}
		got, gotRecs, err := verifyJoin(context.Background(), true, runLen, root, dir, ver, records)
		restore()
		if err != nil {
			t.Fatal(err)
		}
		a, _ := json.Marshal([]any{want, wantRecs})
		b, _ := json.Marshal([]any{got, gotRecs})
		if string(a) != string(b) {
			t.Errorf("records %v: spilled verify differs from the in-memory one:\nmemory  %.3000s\nspilled %.3000s", records, a, b)
		}
		if len(want.Queues) == 0 || len(want.Findings) == 0 || (records && len(wantRecs) == 0) {
			t.Errorf("nothing compared: %d queues, %d findings, %d records", len(want.Queues), len(want.Findings), len(wantRecs))
		}
		if c.calls != 1 || c.runs < minRuns || c.fds == 0 {
			t.Errorf("spilled verify: %d spills, %d question runs, %d temp files open; want 1 spill of at least %d runs in the temp dir", c.calls, c.runs, c.fds, minRuns)
		}
		if n := testutil.OpenFDsUnder(t, tmp); n != 0 {
			t.Errorf("%d temp files still open after the verify", n)
		}
		if first == nil {
			first = want
		}
		t.Logf("records %v: %d queues, %d findings, %d records, %d question runs, %d temp files open", records, len(want.Queues), len(want.Findings), len(wantRecs), c.runs, c.fds)
	}
	return first
}

// TestVerifySpilledSameAsMemory: Verify with its join spilled (the
// prediction's questions answered by an external join) gives the
// in-memory verify's output on every RabbitMQ fixture dataset (without
// its clean-shutdown files: the join spills only for unclean stores), a
// generated store with a deleted file (message-missing findings), one of
// small records in many runs, a queue of three .qi segments referencing
// made-up ids (then with overlapping segments, decided whole), a flipped
// .qs, a bad-body record, and a misread vhost with and without
// --broker-version (at-risk ids, scanner drops).
func TestVerifySpilledSameAsMemory(t *testing.T) {
	for _, d := range datasets {
		t.Run(d.kind+"/"+d.name, func(t *testing.T) {
			root := testutil.Untar(t, testutil.Testdata(d.kind, "datasets", d.name+".tar.gz"))
			dir := filepath.Join(root, d.node, "msg_stores", "vhosts", vhostHash)
			dropClean(t, dir)
			sameVerify(t, root, dir, "", 3, 2)
		})
	}
	t.Run("generated-deleted-file", func(t *testing.T) {
		root, dir := genDeletedFile(t)
		res := sameVerify(t, root, dir, "", 17, 2)
		if len(codes(res.Findings, CodeMessageMissing)) == 0 {
			t.Error("no message-missing finding compared")
		}
	})
	t.Run("generated-many-runs", func(t *testing.T) {
		root := t.TempDir()
		sum, err := gen.Generate(root, gen.Config{Seed: 5, Kind: gen.MC, TotalBytes: 8 << 20, FileLimit: 1 << 20,
			BodyMin: 100, BodyMax: 200, UnrefEvery: 9, HoleEvery: 11})
		if err != nil {
			t.Fatal(err)
		}
		// 64 sources at most are merged at once: past that, merge passes
		// (the questions' readers each leave a partly filled run in
		// memory: runs of 250, not 300, keep the written ones past 64).
		sameVerify(t, root, sum.VHostDir, "", 250, 65)
	})
	t.Run("segments", func(t *testing.T) {
		root, sum := genBigQueue(t)
		sameVerify(t, root, sum.VHostDir, "", 500, 2)
		overlapSegments(t, sum.VHostDir)
		sameVerify(t, root, sum.VHostDir, "", 500, 2)
	})
	t.Run("qs-damage", func(t *testing.T) {
		root, dir := unpack(t, "crash-cqv2")
		flipQSBlob(t, dir)
		sameVerify(t, root, dir, "", 5, 2)
	})
	t.Run("bad-body", func(t *testing.T) {
		recs, _ := realRecords(t)
		bad := append([]byte(nil), recs[1]...)
		bad[24] = 0 // the body's ETF version byte: the frame stays, its body is no term
		root, dir, _, _ := writeVHost(t, []part{{rec: recs[0]}, {rec: bad}, {rec: recs[2]}})
		res := sameVerify(t, root, dir, "", 1, 2)
		if len(codes(res.Findings, CodeMessageMissing)) == 0 {
			t.Error("no message-missing finding for the bad body compared")
		}
	})
	t.Run("misread", func(t *testing.T) {
		recs, plens := realRecords(t)
		a, c := recs[0], recs[1]
		vic := victim(t, recs[0], plens[0], 4116, 0, 0xFF, 1)
		root, dir, _, _ := writeVHost(t, []part{{rec: a}, {hole: 5}, {rec: vic, victim: true}, {rec: c}})
		for _, ver := range []string{"", "3.13.7", "4.0.3", "3.12.14"} {
			res := sameVerify(t, root, dir, ver, 1, 2)
			risk := 0
			for _, q := range res.Queues {
				risk += q.AtRisk[VersionsGen1] + q.AtRisk[VersionsGen2] + q.Drop
			}
			if risk == 0 {
				t.Errorf("--broker-version %q: nothing at risk or dropped compared", ver)
			}
		}
	})
}

// TestVerifySpilledTempFilesAfterError: a spilled verify that is
// cancelled once its questions are sorted, one whose queue dir changes
// between its two reads, and one whose temp dir cannot be written all
// end with an error in the result and no temp file left open.
func TestVerifySpilledTempFilesAfterError(t *testing.T) {
	root, _, dir := genSmallStore(t)
	run := func(t *testing.T, ctx context.Context, then func()) (*scan.Result, error) {
		t.Helper()
		return runSpilled(t, &verifySpillHook, then, "verify", func() (*scan.Result, error) {
			res, _, err := verifyJoin(ctx, true, 100, root, dir, "", false)
			return res, err
		})
	}
	t.Run("cancelled", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		if res, err := run(t, ctx, cancel); !spillFailed(res, err) {
			t.Errorf("a cancelled verify is complete: %+v", res.Errors)
		}
	})
	t.Run("queue-changed", func(t *testing.T) {
		qis, err := filepath.Glob(filepath.Join(dir, "queues", "*", "*.qi"))
		if err != nil || len(qis) == 0 {
			t.Fatal(err, qis)
		}
		vanish := removeLater(t, qis[0])
		res, err := run(t, context.Background(), vanish)
		if err != nil {
			t.Fatal(err)
		}
		if !res.Incomplete || !strings.Contains(strings.Join(res.Errors, "\n"), "changed while it was read") {
			t.Errorf("want the changed queue's error, got %v", res.Errors)
		}
	})
	t.Run("temp-dir-unwritable", func(t *testing.T) {
		scan.SetTempDir(filepath.Join(t.TempDir(), "absent"))
		defer scan.SetTempDir("") // back to $TMPDIR (no test sets another)
		if res, _, err := verifyJoin(context.Background(), true, 100, root, dir, "", false); !spillFailed(res, err) {
			t.Errorf("a verify that could not spill is complete")
		}
	})
}
