package rabbitmq

import (
	"context"
	"errors"
	"os"
	"testing"

	"github.com/storectl/storectl/internal/fileview"
	gen "github.com/storectl/storectl/internal/gen/rabbitmq"
)

// TestReleasedFileShrinks: scanner.open walks a file and lets its pages
// go (fileview.Release); when the file shrinks before analyse reads it
// again, the fault is the file's error, a *fileview.FaultError naming the
// file and an offset past its new end, not a crash.
func TestReleasedFileShrinks(t *testing.T) {
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
	if j.fs.Err != nil || len(j.fs.Records) < 100 || len(j.fs.Gaps) == 0 {
		t.Fatalf("open: %v, %d records, %d gaps", j.fs.Err, len(j.fs.Records), len(j.fs.Gaps))
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
}
