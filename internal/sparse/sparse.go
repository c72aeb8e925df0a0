// Package sparse finds the data extents of sparse files, so scanners can
// skip the holes of mostly-empty pre-allocated files (a 38 MB timer wheel,
// a 160 MiB DLedger index file) instead of reading zeros.
package sparse

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// Extents calls fn, in file order, for each extent [off, end) of the first
// size bytes of f that may hold data; the bytes between them read as
// zeros. Where the file system does not report holes (SEEK_DATA fails
// other than with ENXIO) the rest of the file is one extent: it is read,
// never assumed zero. It returns fn's first error.
func Extents(f *os.File, size int64, fn func(off, end int64) error) error {
	fd := int(f.Fd())
	for pos := int64(0); pos < size; {
		data, err := unix.Seek(fd, pos, unix.SEEK_DATA)
		switch {
		case errors.Is(err, unix.ENXIO):
			return nil
		case err != nil:
			return fn(pos, size)
		case data >= size:
			return nil
		}
		hole, err := unix.Seek(fd, data, unix.SEEK_HOLE)
		if err != nil {
			hole = size
		}
		hole = min(hole, size)
		if err := fn(data, hole); err != nil {
			return err
		}
		pos = hole
	}
	return nil
}

// ReaderAt reads f, answering reads that fall wholly inside a hole with
// zeros without a system call. Holes are found once, when it is made;
// a file that changes afterwards is read as it was.
type ReaderAt struct {
	f    *os.File
	data [][2]int64 // data extents, in order
}

// NewReaderAt maps the data extents of f's first size bytes.
func NewReaderAt(f *os.File, size int64) (*ReaderAt, error) {
	r := &ReaderAt{f: f}
	err := Extents(f, size, func(off, end int64) error {
		r.data = append(r.data, [2]int64{off, end})
		return nil
	})
	return r, err
}

// ReadAt implements io.ReaderAt.
func (r *ReaderAt) ReadAt(p []byte, off int64) (int, error) {
	end := off + int64(len(p))
	for _, d := range r.data {
		if d[0] < end && off < d[1] {
			return r.f.ReadAt(p, off)
		}
	}
	st, err := r.f.Stat()
	if err != nil {
		return 0, err
	}
	if end > st.Size() {
		return r.f.ReadAt(p, off) // let the file say EOF
	}
	clear(p)
	return len(p), nil
}

// Data reports whether any byte of [off, end) may hold data.
func (r *ReaderAt) Data(off, end int64) bool {
	for _, d := range r.data {
		if d[0] < end && off < d[1] {
			return true
		}
	}
	return false
}

// WriteFile creates path holding b followed by a hole up to size bytes,
// the way a broker's preallocated mapped file leaves its unwritten end
// (it reads as zeros and takes no disk space).
func WriteFile(path string, b []byte, size int64) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Truncate(size)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
