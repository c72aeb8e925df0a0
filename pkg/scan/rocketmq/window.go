package rocketmq

import (
	"context"
	"io"
)

// window reads one file with large sequential ReadAt calls into a reusable
// buffer. at(pos, want) returns the bytes from pos to at least
// min(pos+want, size), refilling the buffer when needed.
type window struct {
	ctx      context.Context
	r        io.ReaderAt
	size     int64
	buf      []byte
	start    int64
	n        int
	maxRead  int64 // furthest byte read, for BytesScanned
	progress func(int64)
}

func newWindow(ctx context.Context, r io.ReaderAt, size int64, buf []byte, progress func(int64)) *window {
	return &window{ctx: ctx, r: r, size: size, buf: buf, start: -1, progress: progress}
}

func (w *window) at(pos int64, want int) ([]byte, error) {
	if pos >= w.size || pos < 0 {
		return nil, nil
	}
	end := w.start + int64(w.n)
	if w.start >= 0 && pos >= w.start && (pos+int64(want) <= end || end == w.size) {
		return w.buf[pos-w.start : w.n], nil
	}
	if err := w.ctx.Err(); err != nil {
		return nil, err
	}
	n := int(min(int64(len(w.buf)), w.size-pos))
	got, err := w.r.ReadAt(w.buf[:n], pos)
	if got < n {
		if err == nil || err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		w.start = -1
		return nil, err
	}
	w.start, w.n = pos, n
	if e := pos + int64(n); e > w.maxRead {
		if w.progress != nil {
			w.progress(e - max(w.maxRead, pos))
		}
		w.maxRead = e
	}
	return w.buf[:n], nil
}

// lastNonZero returns the offset of the last non-zero byte in [from, to),
// or -1 when the range is all zeros.
func (w *window) lastNonZero(from, to int64) (int64, error) {
	last := int64(-1)
	for p := from; p < to; {
		b, err := w.at(p, windowSize)
		if err != nil {
			return -1, err
		}
		if len(b) == 0 {
			break
		}
		if int64(len(b)) > to-p {
			b = b[:to-p]
		}
		for i := len(b) - 1; i >= 0; i-- {
			if b[i] != 0 {
				last = p + int64(i)
				break
			}
		}
		p += int64(len(b))
	}
	return last, nil
}

func allZero(b []byte) bool {
	for _, v := range b {
		if v != 0 {
			return false
		}
	}
	return true
}
