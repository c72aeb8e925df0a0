package bytemask

import (
	"syscall"
	"testing"
)

// TestEqPageEnd: Eq of the last 0-64 bytes of a page followed by an
// inaccessible page (a read past the slice would fault) and of every
// start in the page before.
func TestEqPageEnd(t *testing.T) {
	mem, err := syscall.Mmap(-1, 0, 2*pageSize, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		t.Skip(err)
	}
	defer syscall.Munmap(mem)
	if err := syscall.Mprotect(mem[pageSize:], syscall.PROT_NONE); err != nil {
		t.Skip(err)
	}
	for i := range pageSize {
		mem[i] = byte(i % 7)
	}
	for start := 0; start < pageSize; start++ {
		for _, end := range []int{start, min(start+1, pageSize), min(start+63, pageSize), min(start+64, pageSize), pageSize} {
			b := mem[start:end]
			if got, want := Eq(b, 2), naive(b, 2); got != want {
				t.Fatalf("Eq(mem[%d:%d]) = %x, want %x", start, end, got, want)
			}
		}
	}
}
