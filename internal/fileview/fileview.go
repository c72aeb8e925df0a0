// Package fileview reads store files for a scan through bounded,
// read-only memory-mapped windows: no copy out of the page cache, memory
// bounded by the window size whatever the file size, and no eviction of
// the broker's working set. Pages that were not in the page cache before
// a window was mapped (mincore) are dropped again with
// posix_fadvise(POSIX_FADV_DONTNEED) once the scan has moved past them;
// pages the broker had cached stay. When a file cannot be mapped, it is
// read with pread into a buffer instead.
//
// A mapped file that shrinks while it is read raises SIGBUS; callers scan
// under Guard, which turns that fault into an error.
package fileview

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"unsafe"

	"golang.org/x/sys/unix"
)

// MaxWindow bounds one window: the largest slice View hands out. 1 GiB
// holds any record a broker writes (RocketMQ 4 MiB + 64 KiB by default,
// RabbitMQ .rdq files of 16 MiB, at most MaxFileSize of that scanner).
const MaxWindow = 1 << 30

var pageSize = int64(os.Getpagesize())

// ErrFault is the cause of a read that hit a memory fault: the file was
// truncated while it was mapped.
var ErrFault = errors.New("memory fault reading a mapped file (was it truncated while being scanned?)")

// File is one store file opened read-only for scanning. It is not safe
// for concurrent use.
type File struct {
	f    *os.File
	size int64
	// The current window: data covers [start, start+len(data)); mapped is
	// the page-aligned mapping it lies in (nil when read with pread).
	data   []byte
	start  int64
	mapped []byte
	mapOff int64
	// cold[i] is true when page i of the mapping was not in the page
	// cache before it was mapped: it is dropped when unmapped.
	cold    []bool
	buf     []byte // pread fallback
	noMmap  bool
	maxRead int64
	// Progress, when set, is told how many new bytes each window brought
	// in (a caller's rate limiter may sleep in it).
	Progress func(n int64)
	// KeepCache disables dropping the pages the scan brought in.
	KeepCache bool
}

// Open opens path read-only.
func Open(path string) (*File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	_ = unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_SEQUENTIAL)
	return &File{f: f, size: st.Size()}, nil
}

// Size is the file size at Open.
func (v *File) Size() int64 { return v.size }

// MaxRead is the furthest offset any window reached (bytes scanned).
func (v *File) MaxRead() int64 { return v.maxRead }

// View returns the bytes from off to at least min(off+want, Size()),
// reusing the current window when it covers them, else mapping a new
// window of max(want, window) bytes from off. The slice runs to the end
// of the window and is valid until the next View or Close. Past EOF it
// is empty.
func (v *File) View(off int64, want, window int) ([]byte, error) {
	if off < 0 || off >= v.size {
		return nil, nil
	}
	end := v.start + int64(len(v.data))
	if v.data != nil && off >= v.start && (off+int64(want) <= end || end == v.size) {
		return v.data[off-v.start:], nil
	}
	n := min(int64(max(want, window)), v.size-off, MaxWindow)
	if err := v.remap(off, n); err != nil {
		return nil, err
	}
	if e := off + n; e > v.maxRead {
		if v.Progress != nil {
			v.Progress(e - max(v.maxRead, off))
		}
		v.maxRead = e
	}
	return v.data, nil
}

// remap makes [off, off+n) the current window.
func (v *File) remap(off, n int64) error {
	if !v.noMmap {
		err := v.mapWindow(off, n)
		if err == nil {
			return nil
		}
		v.noMmap = true // e.g. a file system without mmap: read instead
		v.release(0, 0)
	}
	if int64(cap(v.buf)) < n {
		v.buf = make([]byte, n)
	}
	b := v.buf[:n]
	got, err := v.f.ReadAt(b, off)
	if int64(got) < n {
		v.data = nil
		if err == nil || err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return err
	}
	// Without a mapping mincore can't tell what was cached before, so the
	// pread fallback leaves the cache alone rather than evict the broker's pages.
	v.data, v.start = b, off
	return nil
}

func (v *File) mapWindow(off, n int64) error {
	mOff := off / pageSize * pageSize
	mLen := off + n - mOff
	m, err := unix.Mmap(int(v.f.Fd()), mOff, int(mLen), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return err
	}
	pages := (mLen + pageSize - 1) / pageSize
	cold := make([]bool, pages)
	if !v.KeepCache {
		vec := make([]byte, pages)
		if err := mincore(m, vec); err == nil {
			for i, r := range vec {
				cold[i] = r&1 == 0
			}
			// Pages of the old window this one also covers keep their state.
			for i := range cold {
				p := mOff + int64(i)*pageSize
				if j := (p - v.mapOff) / pageSize; v.mapped != nil && p >= v.mapOff && j < int64(len(v.cold)) {
					cold[i] = v.cold[j]
				}
			}
		}
	}
	v.release(mOff, mOff+mLen)
	_ = unix.Madvise(m, unix.MADV_SEQUENTIAL)
	if err := unix.Madvise(m, unix.MADV_POPULATE_READ); err != nil {
		_ = unix.Madvise(m, unix.MADV_WILLNEED)
	}
	v.mapped, v.mapOff, v.cold = m, mOff, cold
	v.data, v.start = m[off-mOff:], off
	return nil
}

// release unmaps the current window and drops its cold pages outside
// [keepFrom, keepTo).
func (v *File) release(keepFrom, keepTo int64) {
	if v.mapped == nil {
		v.data = nil
		return
	}
	if !v.KeepCache {
		from := int64(-1)
		flush := func(to int64) {
			if from >= 0 {
				_ = unix.Fadvise(int(v.f.Fd()), from, to-from, unix.FADV_DONTNEED)
				from = -1
			}
		}
		for i, c := range v.cold {
			p := v.mapOff + int64(i)*pageSize
			if c && (p < keepFrom || p >= keepTo) {
				if from < 0 {
					from = p
				}
				continue
			}
			flush(p)
		}
		flush(v.mapOff + int64(len(v.cold))*pageSize)
	}
	_ = unix.Munmap(v.mapped)
	v.mapped, v.cold, v.data = nil, nil, nil
}

// Close unmaps the window, drops the pages the scan brought in and
// closes the file.
func (v *File) Close() error {
	v.release(0, 0)
	v.buf = nil
	return v.f.Close()
}

// mincore fills vec with the page-cache residency of the pages of m.
func mincore(m, vec []byte) error {
	_, _, e := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&m[0])), uintptr(len(m)), uintptr(unsafe.Pointer(&vec[0])))
	if e != 0 {
		return e
	}
	return nil
}

// Guard turns a memory fault of a mapped window (SIGBUS when a file
// shrinks under the scan) into ErrFault in *errp. Use it in the goroutine
// that scans, as
//
//	defer fileview.Guard(&err)()
func Guard(errp *error) func() {
	old := debug.SetPanicOnFault(true)
	return func() {
		debug.SetPanicOnFault(old)
		if r := recover(); r != nil {
			if f, ok := r.(interface{ Addr() uintptr }); ok {
				*errp = fmt.Errorf("%w (address %#x)", ErrFault, f.Addr())
				return
			}
			panic(r)
		}
	}
}
