package fileview

// Where a memory fault happened. Guard recovers the fault with the address
// that faulted; the mappings Open made are registered here so that the
// error can say which file and which offset, as every error on a store
// file does (an operator then knows how far the file was read before it
// shrank). Closed mappings stay findable for a while: a caller's deferred
// Close may run before its deferred Guard recovers.

import (
	"errors"
	"fmt"
	"sync"
	"unsafe"
)

// FaultError is a memory fault reading the mapped file Path at Offset
// (the file shrank under the scan). It wraps ErrFault. Its text gives the
// offset; the callers' messages and findings already name the file.
type FaultError struct {
	Path   string
	Offset int64
}

func (e *FaultError) Error() string { return fmt.Sprintf("offset %d: %v", e.Offset, ErrFault) }

func (e *FaultError) Unwrap() error { return ErrFault }

// FaultOffset returns the offset of a *FaultError in err's chain.
func FaultOffset(err error) (int64, bool) {
	var fe *FaultError
	if errors.As(err, &fe) {
		return fe.Offset, true
	}
	return 0, false
}

// mapped is one registered mapping of a file.
type mapped struct {
	base, size uintptr
	path       string
	off        int64 // the file offset the mapping starts at
}

// recentClosed is how many closed mappings stay findable: more than the
// files a scan has open at once (--jobs), so a fault's mapping is there.
const recentClosed = 64

var mappings struct {
	sync.Mutex
	live   map[uintptr]mapped // by base
	closed [recentClosed]mapped
	next   int
}

func register(m []byte, path string) { registerAt(m, path, 0) }

// registerAt registers a mapping of path that starts at file offset off.
func registerAt(m []byte, path string, off int64) {
	base := uintptr(unsafe.Pointer(unsafe.SliceData(m)))
	mappings.Lock()
	if mappings.live == nil {
		mappings.live = map[uintptr]mapped{}
	}
	mp := mapped{base: base, size: uintptr(len(m)), path: path, off: off}
	mappings.live[base] = mp
	// The address range may be a closed mapping's: that one is gone.
	for i, c := range mappings.closed {
		if c.size > 0 && c.base < mp.base+mp.size && mp.base < c.base+c.size {
			mappings.closed[i] = mapped{}
		}
	}
	mappings.Unlock()
}

func unregister(m []byte) {
	base := uintptr(unsafe.Pointer(unsafe.SliceData(m)))
	mappings.Lock()
	if mp, ok := mappings.live[base]; ok {
		delete(mappings.live, base)
		mappings.closed[mappings.next] = mp
		mappings.next = (mappings.next + 1) % recentClosed
	}
	mappings.Unlock()
}

// locate returns the fault error for addr: a *FaultError when addr lies in
// a registered mapping, else ErrFault with the address.
func locate(addr uintptr) error {
	mappings.Lock()
	defer mappings.Unlock()
	in := func(mp mapped) bool { return mp.size > 0 && addr >= mp.base && addr-mp.base < mp.size }
	for _, mp := range mappings.live {
		if in(mp) {
			return &FaultError{Path: mp.path, Offset: mp.off + int64(addr-mp.base)}
		}
	}
	for k := 1; k <= recentClosed; k++ { // the most recently closed first
		if mp := mappings.closed[(mappings.next-k+recentClosed)%recentClosed]; in(mp) {
			return &FaultError{Path: mp.path, Offset: mp.off + int64(addr-mp.base)}
		}
	}
	return fmt.Errorf("%w (address %#x)", ErrFault, addr)
}
