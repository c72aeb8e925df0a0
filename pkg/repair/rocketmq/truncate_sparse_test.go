package rocketmq

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/storectl/storectl/internal/testutil"
)

// TestLastNonZeroSkipsHoles: truncate's scan for the last non-zero byte
// of a commitlog file reads its data extents only, last first: in a
// 1 TiB sparse file with a byte at 4 KiB and one at 512 GiB it finds each
// without reading the holes (it read all of them, 1 MiB at a time; issue
// 21 defect 9).
func TestLastNonZeroSkipsHoles(t *testing.T) {
	p := filepath.Join(t.TempDir(), "00000000000001048576")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(1 << 40); err != nil {
		t.Skipf("no 1 TiB sparse file here: %v", err)
	}
	for _, off := range []int64{4096, 1 << 39} {
		if _, err := f.WriteAt([]byte{7}, off); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct{ from, to, want int64 }{
		{0, 1 << 40, 1 << 39},
		{0, 1 << 39, 4096},
		{4097, 1 << 39, -1},
		{0, 4096, -1},
	} {
		before := testutil.ReadBytes(t)
		got, err := trLastNonZero(p, c.from, c.to)
		read := testutil.ReadBytes(t) - before
		if err != nil || got != c.want {
			t.Fatalf("[%d, %d): %d %v, want %d", c.from, c.to, got, err, c.want)
		}
		if read > 4*trChunk {
			t.Fatalf("[%d, %d): read %d bytes for two data blocks", c.from, c.to, read)
		}
	}
}
