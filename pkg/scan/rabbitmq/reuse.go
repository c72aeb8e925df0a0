package rabbitmq

import (
	"sync"
	"unsafe"
)

// reuseList keeps a few scratch slices for the next file's walk or hazard
// pass. A sync.Pool does not do here: it is emptied by every collection,
// and a scan of small messages, whose live heap is a few MB, collects
// every few MB allocated, so nearly every Get missed. The list holds at
// most reuseKeep slices of at most reuseMaxBytes each: what a file
// needs, not what the largest one did.
type reuseList[T any] struct {
	mu sync.Mutex
	s  [][]T
}

const (
	reuseKeep     = 4        // parallel.For's workers and one spare
	reuseMaxBytes = 32 << 20 // a 16 MiB file of small messages needs 2-4 MiB
)

// get returns an empty slice, with the capacity of one handed back
// before when there is one.
func (l *reuseList[T]) get() []T {
	l.mu.Lock()
	defer l.mu.Unlock()
	if n := len(l.s); n > 0 {
		b := l.s[n-1]
		l.s[n-1] = nil
		l.s = l.s[:n-1]
		return b[:0]
	}
	return nil
}

// put hands b back; its elements must hold nothing the caller still
// needs (they are reused as they are: clear any pointers first).
func (l *reuseList[T]) put(b []T) {
	var zero T
	if cap(b) == 0 || uintptr(cap(b))*unsafe.Sizeof(zero) > reuseMaxBytes {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.s) < reuseKeep {
		l.s = append(l.s, b[:0])
	}
}
