package repair

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"
)

// sparseFixture writes a file of 3 MiB: some data, a hole, data, a hole
// to EOF; it returns its path and the hex SHA-256 of its full content.
func sparseFixture(t *testing.T) (string, string) {
	t.Helper()
	p := filepath.Join(t.TempDir(), "staged")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	const size = 3 << 20
	content := make([]byte, size)
	for i := range 5000 {
		content[i] = byte(i*7 + 1)
	}
	for i := 1 << 20; i < 1<<20+70000; i++ {
		content[i] = byte(i * 13)
	}
	if _, err := f.WriteAt(content[:5000], 0); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(content[1<<20:1<<20+70000], 1<<20); err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
	s := sha256.Sum256(content)
	return p, hex.EncodeToString(s[:])
}

// TestHashSparse: holes hashed as zeros give the SHA-256 of the content
// (computed from the bytes in memory, not by hashSparse).
func TestHashSparse(t *testing.T) {
	p, want := sparseFixture(t)
	n, got, err := hashWhole(p)
	if err != nil || n != 3<<20 || got != want {
		t.Fatalf("hashWhole = %d %s %v; want %d %s", n, got, err, 3<<20, want)
	}
}

// TestPrehashSource: a prehashed file's next hash is taken from the memo
// (once) and equals the content's SHA-256, also after a rename; a file
// changed after it was prehashed is read again.
func TestPrehashSource(t *testing.T) {
	p, want := sparseFixture(t)
	if err := PrehashSource(p); err != nil {
		t.Fatal(err)
	}
	renamed := p + ".renamed"
	if err := os.Rename(p, renamed); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(renamed)
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.New()
	if !takePrehashed(h, st) {
		t.Fatal("the prehashed state was not found after a rename")
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != want {
		t.Fatalf("prehashed sum %s, want %s", got, want)
	}
	if takePrehashed(sha256.New(), st) {
		t.Fatal("the prehashed state was used twice")
	}
	// Through hashWhole, after a change: the memo must not answer.
	if err := PrehashSource(renamed); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(renamed, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	f.Close()
	b, err := os.ReadFile(renamed)
	if err != nil {
		t.Fatal(err)
	}
	s := sha256.Sum256(b)
	if n, got, err := hashWhole(renamed); err != nil || n != int64(len(b)) || got != hex.EncodeToString(s[:]) {
		t.Fatalf("after a change: hashWhole = %d %s %v; want %d %x", n, got, err, len(b), s)
	}
}

// TestDataExtents: the extents are in order, inside the file and apart;
// the file's bytes outside them are zeros (os.ReadFile is the oracle), and
// where the file system reports holes they leave out most of the 3 MiB.
func TestDataExtents(t *testing.T) {
	p, _ := sparseFixture(t)
	whole, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	size := int64(len(whole))
	rebuilt := make([]byte, size)
	var last, inData int64
	err = DataExtents(f, size, func(off, end int64) error {
		if off < last || end <= off || end > size {
			t.Fatalf("extent [%d, %d) after %d in a file of %d bytes", off, end, last, size)
		}
		if _, err := f.ReadAt(rebuilt[off:end], off); err != nil {
			return err
		}
		last, inData = end, inData+end-off
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(rebuilt, whole) {
		t.Fatal("the file's bytes outside the extents are not all zeros")
	}
	t.Logf("%d of %d bytes in data extents", inData, size)
	if inData == size {
		t.Skip("the file system reports no holes")
	}
	if inData > size/2 {
		t.Errorf("%d of %d bytes in data extents: the holes were not skipped", inData, size)
	}
}
