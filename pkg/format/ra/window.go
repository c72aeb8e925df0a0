package ra

import (
	"errors"
	"fmt"
	"io"
)

// readWindow is how much a reader reads from its file at a time.
const readWindow = 1 << 20

// window is a read-ahead buffer over an io.ReaderAt of known size, so
// that readers of many small records make few large reads.
type window struct {
	r    io.ReaderAt
	size int64

	buf  []byte
	off  int64 // file offset of buf[0]
	read int64 // bytes read so far
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
	if cap(w.buf) < n {
		nb := make([]byte, n)
		copy(nb, w.buf[len(w.buf)-keep:])
		w.buf = nb
	} else {
		copy(w.buf[:cap(w.buf)], w.buf[len(w.buf)-keep:])
		w.buf = w.buf[:n]
	}
	m, err := w.r.ReadAt(w.buf[keep:], off+int64(keep))
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
