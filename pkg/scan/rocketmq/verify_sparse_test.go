package rocketmq

import (
	"context"
	"encoding/binary"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"syscall"
	"testing"

	gen "github.com/storectl/storectl/internal/gen/rocketmq"
	rmq "github.com/storectl/storectl/pkg/format/rocketmq"
	"github.com/storectl/storectl/pkg/scan"
)

// readBytes returns the bytes this process has had read(2) and pread(2)
// return so far (/proc/self/io rchar).
func readBytes(t *testing.T) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/io")
	if err != nil {
		t.Skipf("no /proc/self/io: %v", err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "rchar: "); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Skip("no rchar in /proc/self/io")
	return 0
}

// sparsify rewrites the consume queue file p with its zero tail as a hole
// (as the broker's FileChannel.map leaves it) and returns the hole's size;
// the test skips when the file system keeps no holes.
func sparsify(t *testing.T, p string) int64 {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	keep := len(b)
	for keep > 0 && b[keep-1] == 0 {
		keep--
	}
	keep = (keep + 4095) &^ 4095
	if keep >= len(b) {
		return 0
	}
	if err := os.WriteFile(p, b[:keep], 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(p, int64(len(b))); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	if s, ok := st.Sys().(*syscall.Stat_t); !ok || s.Blocks*512 > int64(keep)+64<<10 {
		t.Skip("the file system keeps no holes")
	}
	return int64(len(b) - keep)
}

// TestVerifySparseQueueTails: with every consume queue file's zero tail a
// hole (one with a stray unit megabytes past its queue's end, as in
// TestVerifyUnitFarPastQueueEnd), verify gives exactly the findings and
// layout it gives for the same files written out in full, and reads at
// least 80% fewer bytes than the holes hold less: it asks the file system
// where data is (SEEK_DATA) instead of reading the zeros.
func TestVerifySparseQueueTails(t *testing.T) {
	roots := [2]string{t.TempDir(), t.TempDir()}
	rel := "consumequeue/TopicB/1/" + rmq.FormatFileName(0)
	for _, root := range roots {
		if _, err := gen.Generate(root, gen.Config{MappedFileSize: 1 << 20, TotalBytes: 1 << 20, Seed: 3}); err != nil {
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
			holes += sparsify(t, p)
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
		before := readBytes(t)
		r, err := Verify(context.Background(), VerifyConfig{Config: Config{Root: root}}, scan.Options{})
		read[i] = readBytes(t) - before
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
