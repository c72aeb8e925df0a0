package rabbitmq

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"testing"

	"github.com/storectl/storectl/internal/fileview"
	gen "github.com/storectl/storectl/internal/gen/rabbitmq"
	"github.com/storectl/storectl/pkg/scan"
)

// withKeptLimit sets keptMaps' limit for a test (the tests of this package
// do not run in parallel) and restores it.
func withKeptLimit(t *testing.T, limit int64) {
	t.Helper()
	keptMaps.mu.Lock()
	old := keptMaps.limit
	keptMaps.limit = limit
	keptMaps.mu.Unlock()
	t.Cleanup(func() {
		keptMaps.mu.Lock()
		keptMaps.limit = old
		keptMaps.mu.Unlock()
	})
}

// keptUsed is the bytes keptMaps has handed out.
func keptUsed() int64 {
	keptMaps.mu.Lock()
	defer keptMaps.mu.Unlock()
	return keptMaps.used
}

// TestKeptSameAsStreamed: a file whose mapping keeps its pages from the
// walk to close (keptMaps) scans and verifies exactly as one streamed and
// released between its passes: Scan's findings, files and record lines
// and Verify's findings are the same JSON with no file kept, every file
// kept, and only some kept (a budget of one file: with two jobs the other
// streams), and the budget is all given back afterwards.
func TestKeptSameAsStreamed(t *testing.T) {
	// Holes and unreferenced records: the hazard models and the
	// off-by-nine walk read the files again after the walk.
	t.Run("large", func(t *testing.T) {
		testKeptSameAsStreamed(t, gen.Config{Seed: 5, Kind: gen.BasicMessage, TotalBytes: 6 << 20,
			FileLimit: 1 << 20, HoleEvery: 40, HoleMax: 64, UnrefEvery: 3}, false)
	})
	// Small messages: a file passes keptMaxRecords part way through its
	// walk and streams from there.
	t.Run("small", func(t *testing.T) {
		testKeptSameAsStreamed(t, gen.Config{Seed: 6, Kind: gen.BasicMessage, TotalBytes: 7 << 20,
			FileLimit: 3 << 20, HoleEvery: 40, HoleMax: 64, UnrefEvery: 3, BodyMin: 20, BodyMax: 60}, true)
	})
}

func testKeptSameAsStreamed(t *testing.T, cfg gen.Config, small bool) {
	root := t.TempDir()
	sum, err := gen.Generate(root, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(fileRecords(t, sum.Files[0])); (n > keptMaxRecords) != small {
		t.Fatalf("%d records in the first file, keptMaxRecords %d", n, keptMaxRecords)
	}
	info, err := os.Stat(sum.Files[0])
	if err != nil {
		t.Fatal(err)
	}
	run := func(t *testing.T, jobs int) string {
		var recs []any
		opts := scan.Options{Jobs: jobs, Records: func(r any) error { recs = append(recs, r); return nil }}
		cfg := Config{Root: root, VHostDirs: []string{sum.VHostDir}}
		res, err := Scan(context.Background(), cfg, opts)
		if err != nil {
			t.Fatal(err)
		}
		vres, err := Verify(context.Background(), cfg, scan.Options{Jobs: jobs})
		if err != nil {
			t.Fatal(err)
		}
		if u := keptUsed(); u != 0 {
			t.Fatalf("%d bytes of keptMaps still held after the scan", u)
		}
		if len(codes(res.Findings, CodeGen1Stop)) == 0 || len(recs) < 100 || len(res.Files) < 2 {
			t.Fatalf("%d generation-1 stops, %d records: the store does not test the models' passes",
				len(codes(res.Findings, CodeGen1Stop)), len(recs))
		}
		b, err := json.Marshal([]any{res.Findings, res.Files, res.Layout, recs, vres.Findings, vres.Layout})
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	for _, jobs := range []int{1, 2} {
		t.Run(fmt.Sprint("jobs=", jobs), func(t *testing.T) {
			withKeptLimit(t, 0)
			want := run(t, jobs)
			for _, limit := range []int64{info.Size(), 1 << 30} {
				withKeptLimit(t, limit)
				if got := run(t, jobs); got != want {
					t.Fatalf("keptMaps limit %d: output differs from the streamed scan's", limit)
				}
			}
		})
	}
}

// TestKeptBudget: open keeps a mapped file only while keptMaps has its
// size; a file that does not fit streams (kept 0), and close gives the
// bytes back.
func TestKeptBudget(t *testing.T) {
	dir := t.TempDir()
	sum, err := gen.Generate(dir, gen.Config{Seed: 9, Kind: gen.MC, TotalBytes: 2 << 20, FileLimit: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	info, err := os.Stat(sum.Files[0])
	if err != nil {
		t.Fatal(err)
	}
	withKeptLimit(t, info.Size()+info.Size()/2)
	s := &scanner{root: dir}
	a := s.open(context.Background(), rdqFile{path: sum.Files[0], num: 0}, false, false)
	b := s.open(context.Background(), rdqFile{path: sum.Files[0], num: 0}, false, false)
	if a.kept != info.Size() || b.kept != 0 || keptUsed() != info.Size() {
		t.Fatalf("kept %d and %d of a %d-byte file, %d used", a.kept, b.kept, info.Size(), keptUsed())
	}
	if len(a.fs.Records) == 0 || len(a.fs.Records) != len(b.fs.Records) {
		t.Fatalf("%d and %d records", len(a.fs.Records), len(b.fs.Records))
	}
	a.close()
	b.close()
	if u := keptUsed(); u != 0 {
		t.Fatalf("%d bytes used after close", u)
	}
	// A file of more than keptMaxRecords records gives its bytes back
	// when the walk finds them, and streams.
	withKeptLimit(t, 1<<30)
	dir = t.TempDir()
	sum, err = gen.Generate(dir, gen.Config{Seed: 9, Kind: gen.MC, TotalBytes: 3 << 20, FileLimit: 3 << 20,
		BodyMin: 20, BodyMax: 60})
	if err != nil {
		t.Fatal(err)
	}
	c := s.open(context.Background(), rdqFile{path: sum.Files[0], num: 0}, false, false)
	defer c.close()
	if len(c.fs.Records) <= keptMaxRecords || c.kept != 0 || keptUsed() != 0 {
		t.Fatalf("%d records: kept %d, %d used", len(c.fs.Records), c.kept, keptUsed())
	}
}

// TestReleasedFileShrinks: scanner.open walks a file and either lets its
// pages go (fileview.Release) or keeps them mapped (keptMaps); when the
// file shrinks before analyse reads it again, the fault is the file's
// error, a *fileview.FaultError naming the file and an offset past its
// new end, not a crash (the kernel unmaps a kept mapping's pages past
// the new end too).
func TestReleasedFileShrinks(t *testing.T) {
	for _, keep := range []bool{false, true} {
		t.Run(fmt.Sprint("kept=", keep), func(t *testing.T) {
			if !keep {
				withKeptLimit(t, 0)
			}
			dir := t.TempDir()
			sum, err := gen.Generate(dir, gen.Config{Seed: 9, Kind: gen.MC, TotalBytes: 2 << 20, FileLimit: 4 << 20,
				HoleEvery: 7, HoleMax: 32, UnrefEvery: 2})
			if err != nil {
				t.Fatal(err)
			}
			p := sum.Files[0]
			s := &scanner{root: dir}
			j := s.open(context.Background(), rdqFile{path: p, num: 0}, false, false)
			defer j.close()
			if j.fs.Err != nil || len(j.fs.Records) < 100 || len(j.fs.Gaps) == 0 || (j.kept > 0) != keep {
				t.Fatalf("open: %v, %d records, %d gaps, kept %d", j.fs.Err, len(j.fs.Records), len(j.fs.Gaps), j.kept)
			}
			for i, r := range j.fs.Records { // the models and the off-by-nine walk read the file again
				r.Status = []string{StatusReferenced, StatusUnreferenced}[i%2]
			}
			const cut = 64 << 10
			if err := os.Truncate(p, cut); err != nil {
				t.Fatal(err)
			}
			j.analyse()
			var fe *fileview.FaultError
			if !errors.As(j.fs.Err, &fe) || fe.Path != p || fe.Offset < cut || fe.Offset >= int64(len(j.b)) {
				t.Fatalf("analyse after the file shrank to %d: %v (%+v), want a fault in %s past %d", cut, j.fs.Err, fe, p, cut)
			}
			t.Logf("%v", j.fs.Err)
		})
	}
}
