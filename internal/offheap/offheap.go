// Package offheap keeps large, long-lived, pointer-free tables in
// anonymous memory mapped outside the Go heap.
//
// A table on the Go heap costs about twice its size in resident memory:
// the collector lets the heap grow to twice its live size before the next
// cycle (GOGC=100), and growing a slice by append copies it into one twice
// as large, so the old and the new copy are both resident for a while.
// A Buf lives in its own mapping instead: it grows with mremap (the kernel
// moves the page table entries, no bytes are copied), the collector never
// scans it or counts it toward the heap goal, and the pages past the end
// of a truncated table go back to the kernel at once. Resident memory is
// then the table's own bytes, rounded up to a page.
//
// Where mapping fails (an exhausted address space or a strict overcommit
// limit), a Buf falls back to an ordinary heap slice: the same results,
// with the heap's cost.
package offheap

import (
	"fmt"
	"reflect"
	"runtime"
	"slices"
	"unsafe"

	"golang.org/x/sys/unix"
)

const minBytes = 64 << 10

// Buf is a growable slice of T outside the Go heap. T must hold no
// pointers (New panics otherwise): the collector does not see what a Buf
// holds. A Buf is not safe for concurrent use, and a slice from Slice is
// valid only until the next Append, Extend, Truncate or Free.
type Buf[T any] struct {
	m *mapping // nil: heap fallback (or nothing allocated yet)
	s []T      // len: elements in use; cap: what m holds
}

// mapping is a Buf's anonymous mapping. It is its own object so a cleanup
// can unmap it when the Buf is dropped without Free.
type mapping struct{ b []byte }

// New returns an empty Buf. It panics if T holds pointers.
func New[T any]() *Buf[T] {
	var zero T
	if t := reflect.TypeOf(zero); t == nil || !pointerFree(t) {
		panic(fmt.Sprintf("offheap: %v holds pointers", t))
	}
	return &Buf[T]{}
}

func pointerFree(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64,
		reflect.Float32, reflect.Float64, reflect.Complex64, reflect.Complex128:
		return true
	case reflect.Array:
		return t.Len() == 0 || pointerFree(t.Elem())
	case reflect.Struct:
		for i := range t.NumField() {
			if !pointerFree(t.Field(i).Type) {
				return false
			}
		}
		return true
	}
	return false
}

// Len returns the number of elements in use.
func (b *Buf[T]) Len() int { return len(b.s) }

// Slice returns the elements in use.
func (b *Buf[T]) Slice() []T { return b.s }

// Append adds x at the end.
func (b *Buf[T]) Append(x T) {
	if len(b.s) == cap(b.s) {
		b.grow(len(b.s) + 1)
	}
	b.s = append(b.s, x) // within cap: never reallocates a mapped Buf
}

// grow makes room for at least need elements: twice the capacity, or
// need if that is more.
func (b *Buf[T]) grow(need int) {
	size := int(unsafe.Sizeof(*new(T)))
	if size == 0 || b.m == nil && cap(b.s) > 0 {
		// Nothing to map, or the heap fallback: ordinary append growth.
		b.s = slices.Grow(b.s, need-len(b.s))
		return
	}
	want := max(minBytes, 2*cap(b.s)*size, need*size)
	want = (want + pageSize - 1) &^ (pageSize - 1)
	var (
		mem []byte
		err error
	)
	if b.m == nil {
		mem, err = unix.Mmap(-1, 0, want, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	} else {
		mem, err = unix.Mremap(b.m.b, want, unix.MREMAP_MAYMOVE)
	}
	if err != nil {
		b.toHeap()
		b.s = slices.Grow(b.s, need-len(b.s))
		return
	}
	if b.m == nil {
		b.m = &mapping{b: mem}
		runtime.AddCleanup(b, func(m *mapping) { m.free() }, b.m)
	}
	b.m.b = mem
	b.s = unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(mem))), len(mem)/size)[:len(b.s)]
}

// toHeap moves the elements to a heap slice and unmaps the mapping.
func (b *Buf[T]) toHeap() {
	if b.m == nil {
		return
	}
	s := append(make([]T, 0, 2*len(b.s)+1), b.s...)
	b.m.free()
	b.m, b.s = nil, s
}

var pageSize = unix.Getpagesize()

// Extend appends n zero elements and returns them (a slice valid until
// the next Append, Extend, Truncate or Free), for a table whose size is
// known up front: one mapping of the right size, not growth step by step.
func (b *Buf[T]) Extend(n int) []T {
	if n < 0 {
		panic(fmt.Sprintf("offheap: Extend(%d)", n))
	}
	if len(b.s)+n > cap(b.s) {
		b.grow(len(b.s) + n)
	}
	from := len(b.s)
	b.s = b.s[:from+n]
	tail := b.s[from:]
	if b.m == nil {
		clear(tail)
		return tail
	}
	// A mapping's pages past the elements in use read as zeros (never
	// touched, or given back by Truncate) but for the rest of the page
	// the last element ends in: clear only that, so the pages of a large
	// Extend are not made resident before the caller writes them.
	size := int(unsafe.Sizeof(*new(T)))
	used := from * size
	end := min((used+pageSize-1)&^(pageSize-1), (from+n)*size)
	clear(b.m.b[used:end])
	return tail
}

// Truncate keeps the first n elements (n <= Len) and gives the whole pages
// past them back to the kernel.
func (b *Buf[T]) Truncate(n int) {
	if n < 0 || n > len(b.s) {
		panic(fmt.Sprintf("offheap: Truncate(%d) of %d elements", n, len(b.s)))
	}
	b.s = b.s[:n]
	if b.m == nil {
		return
	}
	used := n * int(unsafe.Sizeof(*new(T)))
	from := (used + pageSize - 1) &^ (pageSize - 1)
	if from < len(b.m.b) {
		// MADV_DONTNEED on a private anonymous mapping: the pages are
		// freed now and read back as zeros if touched again.
		_ = unix.Madvise(b.m.b[from:], unix.MADV_DONTNEED)
	}
}

// Discard gives the whole pages holding elements [0, n) back to the
// kernel, for a caller done with them that reads on past them (a table
// converted front to back into another): they read as zeros afterwards.
// Len is unchanged. A heap Buf keeps its memory.
func (b *Buf[T]) Discard(n int) {
	if n < 0 || n > len(b.s) {
		panic(fmt.Sprintf("offheap: Discard(%d) of %d elements", n, len(b.s)))
	}
	if b.m == nil {
		return
	}
	to := n * int(unsafe.Sizeof(*new(T))) &^ (pageSize - 1)
	if to > 0 {
		_ = unix.Madvise(b.m.b[:to], unix.MADV_DONTNEED)
	}
}

// Free releases the memory. The Buf is empty afterwards and may be used
// again.
func (b *Buf[T]) Free() {
	if b.m != nil {
		b.m.free()
		b.m = nil
	}
	b.s = nil
}

func (m *mapping) free() {
	if m.b != nil {
		_ = unix.Munmap(m.b)
		m.b = nil
	}
}

// Mapped reports whether the elements live in a mapping (false: on the
// heap, after a failed mapping or before the first Append).
func (b *Buf[T]) Mapped() bool { return b.m != nil }

// AdviseHugePages asks the kernel to back the mapping with transparent
// huge pages (madvise MADV_HUGEPAGE), for a large table read and written
// at random: one TLB entry then covers 2 MiB instead of 4 KiB, so a
// lookup no longer waits on a page walk as well as on the cache. Call it
// before the pages are first written. A heap Buf, or a kernel without
// the feature, ignores it: the same results, at the ordinary speed.
func (b *Buf[T]) AdviseHugePages() {
	if b.m != nil && len(b.m.b) > 0 {
		_ = unix.Madvise(b.m.b, unix.MADV_HUGEPAGE)
	}
}
