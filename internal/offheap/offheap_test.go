package offheap

import (
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

type rec struct {
	id  [16]byte
	a   int32
	off uint32
}

func mk(i int) rec {
	var r rec
	for k := range r.id {
		r.id[k] = byte(i >> (k % 4 * 8))
	}
	r.a, r.off = int32(i), uint32(3*i)
	return r
}

// TestAppendGrowTruncate fills a Buf across many mremap growths and checks
// every element survives each move, then truncates and appends again.
func TestAppendGrowTruncate(t *testing.T) {
	b := New[rec]()
	const n = 300_000 // 7.2 MB: several doublings from 64 KiB
	for i := range n {
		b.Append(mk(i))
	}
	if !b.Mapped() {
		t.Fatal("a 7 MB Buf is not mapped")
	}
	check := func(n int) {
		t.Helper()
		s := b.Slice()
		if len(s) != n {
			t.Fatalf("Len %d, want %d", len(s), n)
		}
		for i := range s {
			if s[i] != mk(i) {
				t.Fatalf("element %d = %+v, want %+v", i, s[i], mk(i))
			}
		}
	}
	check(n)
	b.Truncate(1000)
	check(1000)
	for i := 1000; i < 5000; i++ {
		b.Append(mk(i))
	}
	check(5000) // appends after Truncate see no stale bytes
	b.Free()
	if b.Len() != 0 || b.Mapped() {
		t.Fatalf("after Free: Len %d, Mapped %v", b.Len(), b.Mapped())
	}
	b.Append(mk(7))
	if b.Slice()[0] != mk(7) {
		t.Fatal("Buf not usable after Free")
	}
	b.Free()
}

// TestTruncateReturnsPages reads the process's anonymous RSS: filling a
// 64 MB Buf raises it by about 64 MB and truncating it to one element gives
// that back.
func TestTruncateReturnsPages(t *testing.T) {
	b := New[rec]()
	defer b.Free()
	before := rssAnon(t)
	for i := range 64 << 20 / 24 {
		b.Append(mk(i))
	}
	full := rssAnon(t)
	b.Truncate(1)
	after := rssAnon(t)
	t.Logf("RssAnon: before %d KiB, full %d KiB, truncated %d KiB", before, full, after)
	if full-before < 48<<10 {
		t.Fatalf("filling 64 MB raised RssAnon by only %d KiB", full-before)
	}
	if full-after < 48<<10 {
		t.Fatalf("Truncate gave back only %d KiB of 64 MB", full-after)
	}
	if b.Slice()[0] != mk(0) {
		t.Fatal("Truncate lost the kept element")
	}
}

func rssAnon(t *testing.T) int {
	t.Helper()
	runtime.GC()
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Skipf("no /proc/self/status: %v", err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "RssAnon:" {
			n, err := strconv.Atoi(f[1])
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Skip("no RssAnon in /proc/self/status")
	return 0
}

// TestHeapFallback moves a mapped Buf to the heap (what a failed mremap
// does) and checks it keeps working.
func TestHeapFallback(t *testing.T) {
	b := New[rec]()
	for i := range 10_000 {
		b.Append(mk(i))
	}
	b.toHeap()
	if b.Mapped() {
		t.Fatal("still mapped after toHeap")
	}
	for i := 10_000; i < 50_000; i++ {
		b.Append(mk(i))
	}
	b.Truncate(40_000)
	for i, r := range b.Slice() {
		if r != mk(i) {
			t.Fatalf("element %d = %+v", i, r)
		}
	}
	if b.Len() != 40_000 {
		t.Fatalf("Len %d", b.Len())
	}
}

func TestNewRejectsPointers(t *testing.T) {
	for name, f := range map[string]func(){
		"pointer": func() { New[*int]() },
		"slice":   func() { New[struct{ b []byte }]() },
		"string":  func() { New[[2]string]() },
		"iface":   func() { New[any]() },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: New did not panic", name)
				}
			}()
			f()
		}()
	}
	New[rec]() // pointer-free: no panic
}

func TestTruncateOutOfRange(t *testing.T) {
	b := New[rec]()
	b.Append(mk(1))
	defer func() {
		if recover() == nil {
			t.Fatal("Truncate beyond Len did not panic")
		}
	}()
	b.Truncate(2)
}

// TestDiscard: Discard gives back the whole pages before element n (they
// read as zeros) and keeps every element from the first partly kept page
// on; Len is unchanged, and a Discard past Len panics.
func TestDiscard(t *testing.T) {
	b := New[uint64]()
	const n = 10000 // 80000 bytes: several pages
	for i := range n {
		b.Append(uint64(i) + 1)
	}
	if !b.Mapped() {
		t.Skip("no mapping on this system: Discard keeps heap memory")
	}
	b.Discard(1500) // 12000 bytes: the first 2 pages of 4 KiB
	s := b.Slice()
	if b.Len() != n {
		t.Fatalf("Len %d after Discard, want %d", b.Len(), n)
	}
	per := pageSize / 8
	for i := range n {
		discarded := i < 1500/per*per
		if discarded && s[i] != 0 || !discarded && s[i] != uint64(i)+1 {
			t.Fatalf("element %d = %d after Discard(1500) (page size %d)", i, s[i], pageSize)
		}
	}
	defer func() {
		if recover() == nil {
			t.Error("Discard past Len did not panic")
		}
	}()
	b.Discard(n + 1)
}

// TestExtend: Extend appends zero elements (also after a Truncate left
// stale bytes in the rest of a page, and on the heap fallback) and keeps
// the elements before them; a 64 MB Extend of a mapped Buf takes one
// mapping of the right size and raises RssAnon only as its pages are
// written, not at once.
func TestExtend(t *testing.T) {
	b := New[rec]()
	defer b.Free()
	for i := range 1000 {
		b.Append(mk(i))
	}
	b.Truncate(10) // elements 10.. of the first page keep their bytes
	tail := b.Extend(5000)
	if len(tail) != 5000 || b.Len() != 5010 {
		t.Fatalf("Extend(5000): %d elements returned, Len %d", len(tail), b.Len())
	}
	for i, r := range b.Slice() {
		if want := (rec{}); i >= 10 && r != want {
			t.Fatalf("element %d after Truncate and Extend = %+v, want zero", i, r)
		} else if i < 10 && r != mk(i) {
			t.Fatalf("kept element %d = %+v", i, r)
		}
	}
	h := New[rec]()
	for i := range 100 {
		h.Append(mk(i))
	}
	h.toHeap()
	h.Truncate(50)
	if got := h.Extend(100); len(got) != 100 || got[0] != (rec{}) || got[49] != (rec{}) || h.Len() != 150 || h.Slice()[49] != mk(49) {
		t.Fatalf("heap Extend: %d returned, Len %d", len(got), h.Len())
	}

	big := New[rec]()
	defer big.Free()
	before := rssAnon(t)
	s := big.Extend(64 << 20 / 24)
	extended := rssAnon(t)
	for i := range s {
		s[i] = mk(i)
	}
	written := rssAnon(t)
	t.Logf("RssAnon: before %d KiB, extended %d KiB, written %d KiB; mapping %d bytes", before, extended, written, len(big.m.b))
	if extended-before > 8<<10 {
		t.Errorf("a 64 MB Extend raised RssAnon by %d KiB before any write", extended-before)
	}
	if written-extended < 48<<10 {
		t.Errorf("writing 64 MB raised RssAnon by only %d KiB", written-extended)
	}
	if len(big.m.b) > 64<<20+pageSize {
		t.Errorf("mapping of %d bytes for 64 MB", len(big.m.b))
	}
}

// TestExtendZeroSize: Extend of a zero-size element type gives n
// elements, as for any other type (grow ignored need for it, so an Extend
// of more than one panicked slicing past the capacity).
func TestExtendZeroSize(t *testing.T) {
	b := New[struct{}]()
	defer b.Free()
	b.Append(struct{}{})
	if got := b.Extend(5); len(got) != 5 || b.Len() != 6 {
		t.Fatalf("Extend(5) of struct{}: %d returned, Len %d", len(got), b.Len())
	}
}
