package repair

import (
	"crypto/sha256"
	"encoding"
	"fmt"
	"io"
	"os"
	"sync"
	"syscall"

	"github.com/storectl/storectl/internal/sparse"

	"github.com/storectl/storectl/internal/storefile"
)

// zeroBlock feeds the holes of sparse files to a hash.
var zeroBlock [1 << 16]byte

// DataExtents calls fn, in file order, for each extent [off, end) of the
// first size bytes of f that may hold data; the bytes between them (and
// after the last) are holes, which read as zeros. A file system that does
// not report holes (SEEK_DATA/SEEK_HOLE fail other than with ENXIO) gives
// what is left as one extent: it is then read, never assumed zero. It
// returns fn's first error.
func DataExtents(f *os.File, size int64, fn func(off, end int64) error) error {
	return sparse.Extents(f, size, fn)
}

// hashSparse writes the bytes of f to h and returns how many. Holes
// (DataExtents: a staged RocketMQ index file is mostly a sparse run of
// zeros, 420 MB at the broker's defaults) are fed from a zero buffer
// instead of being read, which spares the kernel zero-filling them.
func hashSparse(h io.Writer, f *os.File) (int64, error) {
	st, err := f.Stat()
	if err != nil {
		return 0, err
	}
	size := st.Size()
	if takePrehashed(h, st) {
		return size, nil
	}
	buf := make([]byte, chunkSize)
	zeros := func(n int64) {
		for n > 0 {
			k := min(n, int64(len(zeroBlock)))
			h.Write(zeroBlock[:k])
			n -= k
		}
	}
	pos := int64(0)
	err = DataExtents(f, size, func(data, end int64) error {
		zeros(data - pos)
		for pos = data; pos < end; {
			k := min(int64(len(buf)), end-pos)
			got, err := f.ReadAt(buf[:k], pos)
			h.Write(buf[:got])
			pos += int64(got)
			if int64(got) < k {
				if err == nil || err == io.EOF {
					err = io.ErrUnexpectedEOF
				}
				return fmt.Errorf("%s at %d: %w", f.Name(), pos, err)
			}
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	zeros(size - pos)
	return size, nil
}

// prehashKey identifies one version of a file: a write changes its size or
// modification time (a rename changes neither, so a staged file may be
// renamed after it was prehashed).
type prehashKey struct {
	dev, ino   uint64
	size       int64
	mtimeNanos int64
}

// prehashed holds SHA-256 states PrehashSource computed, until the next
// hashSparse of the same file version takes them (once).
var prehashed struct {
	sync.Mutex
	m map[prehashKey][]byte
}

// maxPrehashed bounds the remembered states (about 100 bytes each): a
// caller that prehashes files nobody hashes later cannot grow memory.
const maxPrehashed = 4096

func prehashKeyOf(st os.FileInfo) (prehashKey, bool) {
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !ok || !st.Mode().IsRegular() {
		return prehashKey{}, false
	}
	return prehashKey{dev: uint64(sys.Dev), ino: uint64(sys.Ino), size: st.Size(), mtimeNanos: st.ModTime().UnixNano()}, true
}

// PrehashSource hashes the staged file at path now (holes fed as zeros, as
// hashSparse does) and remembers the SHA-256 state, so that the next hash
// of the same file version (Plan.Add naming it as an action's Source)
// takes it instead of reading the file again. A caller that stages a large
// file can so hash it concurrently with other work, off the plan's
// critical path. The state is used once: a later check (the apply-time
// precondition) reads the file again.
func PrehashSource(path string) error {
	f, err := storefile.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	k, ok := prehashKeyOf(st)
	if !ok {
		return nil
	}
	h := sha256.New()
	if _, err := hashSparse(h, f); err != nil {
		return err
	}
	if st2, err := f.Stat(); err != nil || !sameVersion(k, st2) {
		return err // changed while it was read: remember nothing
	}
	state, err := h.(encoding.BinaryMarshaler).MarshalBinary()
	if err != nil {
		return err
	}
	prehashed.Lock()
	defer prehashed.Unlock()
	if prehashed.m == nil {
		prehashed.m = map[prehashKey][]byte{}
	}
	if len(prehashed.m) < maxPrehashed {
		prehashed.m[k] = state
	}
	return nil
}

// DropPrehashed forgets what PrehashSource remembered for the file at
// path, for a caller about to delete it (a new file may get its inode).
func DropPrehashed(path string) {
	st, err := os.Stat(path)
	if err != nil {
		return
	}
	if k, ok := prehashKeyOf(st); ok {
		prehashed.Lock()
		delete(prehashed.m, k)
		prehashed.Unlock()
	}
}

func sameVersion(k prehashKey, st os.FileInfo) bool {
	k2, ok := prehashKeyOf(st)
	return ok && k2 == k
}

// takePrehashed loads into h (a fresh SHA-256) the state PrehashSource
// remembered for this version of the file, once; false when there is none
// or h is not a SHA-256 (its state would not load).
func takePrehashed(h io.Writer, st os.FileInfo) bool {
	k, ok := prehashKeyOf(st)
	if !ok {
		return false
	}
	prehashed.Lock()
	state, found := prehashed.m[k]
	delete(prehashed.m, k)
	prehashed.Unlock()
	u, isUnm := h.(encoding.BinaryUnmarshaler)
	return found && isUnm && u.UnmarshalBinary(state) == nil
}
