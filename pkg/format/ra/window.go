package ra

import (
	"errors"
	"fmt"
	"io"
)

// readWindow is how much a reader reads from its file at a time.
const readWindow = 1 << 20

// Mapper is an io.ReaderAt that can also hand out a file's bytes in
// place (from a memory mapping) instead of copying them. Map returns the
// bytes [off, off+n) of the file, fewer when the file now ends before
// off+n; they stay valid until the next Map. A reader over a Mapper takes
// its windows from Map (the same windows, so BytesRead does not change)
// and never calls ReadAt.
type Mapper interface {
	io.ReaderAt
	Map(off int64, n int) ([]byte, error)
}

// window is a read-ahead buffer over an io.ReaderAt of known size, so
// that readers of many small records make few large reads.
type window struct {
	r    io.ReaderAt
	size int64

	buf  []byte // the current window: own[:n], or bytes from a Mapper
	own  []byte // the buffer reads go into
	off  int64  // file offset of buf[0]
	read int64  // bytes read so far
}

// at returns the file's bytes from off: at least need of them, or all up
// to end of file when fewer remain (nil at or past end of file). The
// slice is valid until the next call.
func (w *window) at(off int64, need int) ([]byte, error) {
	if off >= w.size || off < 0 {
		return nil, nil
	}
	rem := w.size - off
	if int64(need) > rem {
		need = int(rem)
	}
	if off >= w.off && off+int64(need) <= w.off+int64(len(w.buf)) {
		return w.buf[off-w.off:], nil
	}
	n := max(need, readWindow)
	if int64(n) > rem {
		n = int(rem)
	}
	// keep what the buffer already holds from off on: a record that
	// straddles the window's end is not read twice
	keep := 0
	if off >= w.off && off < w.off+int64(len(w.buf)) {
		keep = int(w.off + int64(len(w.buf)) - off)
	}
	var m int
	var err error
	if mr, ok := w.r.(Mapper); ok {
		// the same window, in place: what a read would have copied
		// from off+keep on
		var b []byte
		b, err = mr.Map(off, n)
		m = max(len(b)-keep, 0)
		w.buf = b
	} else {
		if cap(w.own) < n {
			nb := make([]byte, n)
			copy(nb, w.buf[len(w.buf)-keep:])
			w.own = nb
		} else {
			copy(w.own[:cap(w.own)], w.buf[len(w.buf)-keep:])
		}
		w.buf = w.own[:n]
		m, err = w.r.ReadAt(w.buf[keep:], off+int64(keep))
	}
	w.read += int64(m)
	if m < n-keep {
		w.buf = w.buf[:0]
		if err == nil || errors.Is(err, io.EOF) {
			err = fmt.Errorf("read %d bytes at offset %d: the file ends at %d", n-keep, off+int64(keep), off+int64(keep)+int64(m))
		}
		return nil, err
	}
	w.off = off
	return w.buf, nil
}
