package fileview

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// TestMapped reads a file of three and a half windows through Map at
// random offsets and lengths (forward and back, inside the current
// mapping and across its end) and checks every slice against the file's
// bytes, that a window past the end comes back short and that one at or
// past the end is empty.
func TestMapped(t *testing.T) {
	size := 3*MapWindow + MapWindow/2 + 123
	p, want := tempFile(t, size)
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m := NewMapped(f, p)
	defer m.Close()
	r := rand.New(rand.NewPCG(3, 4))
	off := int64(0)
	var last []byte // the slice of the Map before: still valid
	var lastOff int64
	for i := 0; i < 400; i++ {
		switch r.IntN(4) {
		case 0: // anywhere
			off = r.Int64N(int64(size))
		default: // onwards, as a reader goes
			off = (off + r.Int64N(1<<20)) % int64(size)
		}
		n := 1 + r.IntN(2<<20)
		if r.IntN(20) == 0 {
			n = MapWindow + r.IntN(MapWindow) // longer than a window
		}
		b, err := m.Map(off, n)
		if err != nil {
			t.Fatal(err)
		}
		wantN := min(int64(n), int64(size)-off)
		if int64(len(b)) != wantN || !bytes.Equal(b, want[off:off+wantN]) {
			t.Fatalf("Map(%d, %d): %d bytes, want %d (equal %v)", off, n, len(b), wantN, bytes.Equal(b, want[off:off+min(int64(len(b)), wantN)]))
		}
		if !bytes.Equal(last, want[lastOff:lastOff+int64(len(last))]) {
			t.Fatalf("the slice of Map(%d) changed after the next Map", lastOff)
		}
		last, lastOff = b, off
	}
	for _, off := range []int64{int64(size), int64(size) + 5} {
		if b, err := m.Map(off, 10); err != nil || len(b) != 0 {
			t.Fatalf("Map(%d) at or past the end: %d bytes, %v", off, len(b), err)
		}
	}
}

// TestMappedShrunk: a file that shrinks before a window is mapped gives a
// short window (as a read does); bytes of a window mapped before it
// shrank fault, and Guard names the file and the file offset (not the
// offset in the window's mapping).
func TestMappedShrunk(t *testing.T) {
	size := 3 * MapWindow
	p, want := tempFile(t, size)
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m := NewMapped(f, p)
	defer m.Close()
	off := int64(MapWindow + 8191) // a window from the page before
	b, err := m.Map(off, MapWindow)
	if err != nil || !bytes.Equal(b, want[off:off+MapWindow]) {
		t.Fatalf("Map: %d bytes, %v", len(b), err)
	}
	if err := os.Truncate(p, int64(MapWindow)); err != nil {
		t.Fatal(err)
	}
	const at = 100000
	var ferr error
	func() {
		defer Guard(&ferr)()
		sink = b[at]
	}()
	var fe *FaultError
	if !errors.As(ferr, &fe) || fe.Path != p || fe.Offset != off+at {
		t.Fatalf("fault: %v (%+v), want %s at offset %d", ferr, fe, p, off+at)
	}
	// a new window now stops at the new end
	if b, err := m.Map(MapWindow-10, 100); err != nil || !bytes.Equal(b, want[MapWindow-10:MapWindow]) {
		t.Fatalf("Map across the new end: %d bytes, %v, want 10", len(b), err)
	}
	if b, err := m.Map(off, 100); err != nil || len(b) != 0 {
		t.Fatalf("Map past the new end: %d bytes, %v", len(b), err)
	}
}

// TestMapCached: a file all in the page cache is read through a Mapped,
// one whose pages were dropped through the file itself (pread).
func TestMapCached(t *testing.T) {
	p, want := tempFile(t, 3<<20+17)
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := os.ReadFile(p); err != nil {
		t.Fatal(err)
	}
	r, done := MapCached(f, p)
	m, ok := r.(*Mapped)
	if !ok {
		t.Fatalf("cached file: %T, want *Mapped", r)
	}
	if b, err := m.Map(1<<20, 100); err != nil || !bytes.Equal(b, want[1<<20:1<<20+100]) {
		t.Fatalf("Map: %v", err)
	}
	done()
	f.Sync()
	unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED)
	if n, _ := resident(t, p); n > 0 {
		t.Skipf("%d pages still cached after FADV_DONTNEED", n)
	}
	if r, done := MapCached(f, p); r != io.ReaderAt(f) {
		t.Fatalf("uncached file: %T, want the *os.File", r)
	} else {
		done()
	}
}
