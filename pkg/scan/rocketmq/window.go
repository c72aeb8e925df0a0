package rocketmq

import (
	"context"
	"encoding/binary"

	"github.com/storectl/storectl/internal/fileview"
)

// window reads one file through bounded windows (internal/fileview: one
// reusable cache-sized buffer; pages the scan brought into the page cache
// are dropped again). at(pos, want) returns the bytes from pos to at least
// min(pos+want, size).
type window struct {
	ctx  context.Context
	f    *fileview.File
	size int64
}

func newWindow(ctx context.Context, f *fileview.File) *window {
	return &window{ctx: ctx, f: f, size: f.Size()}
}

func (w *window) at(pos int64, want int) ([]byte, error) {
	if pos >= w.size || pos < 0 {
		return nil, nil
	}
	if err := w.ctx.Err(); err != nil {
		return nil, err
	}
	return w.f.View(pos, want, windowSize)
}

// record returns the bytes from pos covering the record there: its
// TOTALSIZE when that is a plausible size (at most maxSize), else at
// least 8 bytes; always cut by EOF only. Asking for the record's own
// size, not maxSize, lets one window serve many records.
func (w *window) record(pos int64, maxSize int) ([]byte, error) {
	b, err := w.at(pos, 8)
	if err != nil || len(b) < 4 {
		return b, err
	}
	if ts := int32(binary.BigEndian.Uint32(b)); int(ts) > len(b) && int(ts) <= maxSize {
		return w.at(pos, int(ts))
	}
	return b, nil
}

// maxRead is the furthest byte read, for BytesScanned.
func (w *window) maxRead() int64 { return w.f.MaxRead() }

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
		if i := lastNonZeroByte(b); i >= 0 {
			last = p + int64(i)
		}
		p += int64(len(b))
	}
	return last, nil
}

// lastNonZeroByte returns the index of the last non-zero byte of b, or -1.
// It tests 32 bytes per step: zero tails run to megabytes.
func lastNonZeroByte(b []byte) int {
	i := len(b)
	for i >= 32 {
		q := b[i-32 : i]
		if binary.LittleEndian.Uint64(q)|binary.LittleEndian.Uint64(q[8:])|
			binary.LittleEndian.Uint64(q[16:])|binary.LittleEndian.Uint64(q[24:]) != 0 {
			break
		}
		i -= 32
	}
	for i > 0 {
		i--
		if b[i] != 0 {
			return i
		}
	}
	return -1
}

// firstNonZeroByte returns the index of the first non-zero byte of b, or
// -1. It tests 32 bytes per step, like lastNonZeroByte.
func firstNonZeroByte(b []byte) int {
	i := 0
	for ; i+32 <= len(b); i += 32 {
		q := b[i : i+32]
		if binary.LittleEndian.Uint64(q)|binary.LittleEndian.Uint64(q[8:])|
			binary.LittleEndian.Uint64(q[16:])|binary.LittleEndian.Uint64(q[24:]) != 0 {
			break
		}
	}
	for ; i < len(b); i++ {
		if b[i] != 0 {
			return i
		}
	}
	return -1
}

func allZero(b []byte) bool {
	return lastNonZeroByte(b) < 0
}
