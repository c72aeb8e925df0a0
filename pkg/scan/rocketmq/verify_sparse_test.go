package rocketmq

import (
	"context"
	"encoding/binary"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	gen "github.com/storectl/storectl/internal/gen/rocketmq"
	"github.com/storectl/storectl/internal/testutil"
	rmq "github.com/storectl/storectl/pkg/format/rocketmq"
	"github.com/storectl/storectl/pkg/scan"
)

// TestVerifySparseQueueTails: with every consume queue file's zero tail a
// hole (one with a stray unit megabytes past its queue's end, as in
// TestVerifyUnitFarPastQueueEnd), verify gives exactly the findings and
// layout it gives for the same files written out in full, and reads at
// least 80% fewer bytes than the holes hold less: it asks the file system
// where data is (SEEK_DATA) instead of reading the zeros.
func TestVerifySparseQueueTails(t *testing.T) {
	roots := [2]string{t.TempDir(), t.TempDir()}
	rel := "consumequeue/TopicB/1/" + rmq.FormatFileName(0)
	for i, root := range roots {
		if _, err := gen.Generate(root, gen.Config{MappedFileSize: 1 << 20, TotalBytes: 1 << 20, Seed: 3, DenseCQ: i == 0}); err != nil {
			t.Fatal(err)
		}
		st, err := os.Stat(filepath.Join(root, rel))
		if err != nil {
			t.Fatal(err)
		}
		off := st.Size()/rmq.CQUnitSize*rmq.CQUnitSize - 7*rmq.CQUnitSize
		vpatch(t, root, rel, off, binary.BigEndian.AppendUint64(nil, 12345))
	}
	var holes int64
	files := 0
	err := filepath.WalkDir(filepath.Join(roots[1], "consumequeue"), func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			holes += testutil.HoleTail(t, p)
			files++
		}
		return err
	})
	if err != nil || holes == 0 {
		t.Fatalf("%d consume queue files, %d bytes of holes (%v)", files, holes, err)
	}
	var res [2]*scan.Result
	var read [2]int64
	for i, root := range roots {
		before := testutil.ReadBytes(t)
		r, err := Verify(context.Background(), VerifyConfig{Config: Config{Root: root}}, scan.Options{})
		read[i] = testutil.ReadBytes(t) - before
		if err != nil || r.Incomplete {
			t.Fatalf("verify: %v %v", err, r.Errors)
		}
		res[i] = r
	}
	t.Logf("%d consume queue files, %d bytes of holes; verify read %d bytes written out, %d with holes",
		files, holes, read[0], read[1])
	if len(findCode(res[0], CodeCQBadUnit)) != 1 {
		t.Fatalf("the stray unit was not the one bad-unit finding: %v", warnings(res[0]))
	}
	if !reflect.DeepEqual(res[0].Findings, res[1].Findings) || !reflect.DeepEqual(res[0].Layout, res[1].Layout) {
		t.Fatalf("findings or layout differ: %d vs %d findings", len(res[0].Findings), len(res[1].Findings))
	}
	if saved := read[0] - read[1]; saved < holes*8/10 {
		t.Errorf("holes of %d bytes, but only %d fewer bytes read", holes, saved)
	}
}
