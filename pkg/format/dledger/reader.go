package dledger

import (
	"errors"
	"fmt"
	"io"

	"github.com/storectl/storectl/pkg/format"
)

// End reasons of a data file walk.
const (
	EndBlank = "blank" // the -1 | remaining file end
	EndZero  = "zero"  // size 0: the end of written data
	EndEOF   = "eof"   // the last entry ends where the file does
	EndTorn  = "torn"  // an entry (or its header) runs past the end of the file
	EndBad   = "bad"   // a header recovery rejects
)

// DefaultMaxEntrySize bounds an entry: DLedger's 4 MiB entry buffer
// (localEntryBuffer in DLedgerMmapFileStore).
const DefaultMaxEntrySize = 4 << 20

// readChunk is the read window: 512 KiB, so the copy out of the page
// cache is still in the 1 MiB L2 cache when the body CRC reads it (as the
// commitlog reader's); 1 MiB windows took more CPU and 4 MiB more RSS.
const readChunk = 512 << 10

// Reader walks the entries of one data file from position 0, as
// DLedgerMmapFileStore.recover's scan does, in the style of bufio.Scanner:
//
//	r := dledger.NewReader(f, size, base, 0)
//	for r.Next() { h := r.Header(); body := r.Body(); ... }
//	end, pos := r.End()
//
// Next stops at the BLANK, at size 0, at a header Header.Check rejects
// (End EndBad, Err a *format.CorruptError), at a torn entry and at an I/O
// error (Err). Offsets are data offsets: base plus the file position.
type Reader struct {
	ra      io.ReaderAt
	sl      Slicer // ra as a Slicer, nil when it is not one
	size    int64
	base    int64
	maxSize int
	pos     int64
	buf     []byte
	bufAt   int64
	h       Header
	body    []byte
	end     string
	err     error
	done    bool
}

// NewReader returns a reader over a data file of size bytes whose first
// byte is at data offset base; maxSize bounds an entry
// (DefaultMaxEntrySize when <= 0).
func NewReader(ra io.ReaderAt, size, base int64, maxSize int) *Reader {
	if maxSize <= 0 {
		maxSize = DefaultMaxEntrySize
	}
	r := &Reader{ra: ra, size: size, base: base, maxSize: maxSize, bufAt: -1}
	r.sl, _ = ra.(Slicer)
	return r
}

// Slicer is an io.ReaderAt over memory (a mapped file): Slice returns the
// bytes [off, off+n) in place, without a copy, valid as long as the
// Slicer is (not only until the next call), or an error when they are
// not all there. A Reader over a Slicer takes the same windows from it
// that it would read, and its Body stays valid after Next (InPlace).
type Slicer interface {
	Slice(off int64, n int) ([]byte, error)
}

// InPlace reports whether the Reader takes its windows from a Slicer:
// then a Body stays valid after the next Next, as long as the Slicer is.
func (r *Reader) InPlace() bool { return r.sl != nil }

// Next reads the next entry.
func (r *Reader) Next() bool {
	if r.done {
		return false
	}
	rest := r.size - r.pos
	if rest == 0 {
		return r.stop(EndEOF, nil)
	}
	if rest < 8 {
		return r.stop(EndTorn, format.Corrupt(r.base+r.pos, "magic", format.ErrShort))
	}
	b, err := r.bytes(r.pos, 8)
	if err != nil {
		return r.stop("", err)
	}
	if IsBlank(b) {
		return r.stop(EndBlank, nil)
	}
	if b[4]|b[5]|b[6]|b[7] == 0 {
		return r.stop(EndZero, nil)
	}
	if rest < BodyOffset {
		return r.stop(EndTorn, format.Corrupt(r.base+r.pos, "header", format.ErrShort))
	}
	if b, err = r.bytes(r.pos, BodyOffset); err != nil {
		return r.stop("", err)
	}
	h := &r.h // decoded in place (Header.decode); a stop keeps it too
	h.decode(b)
	if err := h.Check(r.base + r.pos); err != nil {
		return r.stop(EndBad, err)
	}
	switch {
	case int(h.Size) > r.maxSize:
		return r.stop(EndBad, format.Corrupt(r.base+r.pos+4, "size", fmt.Errorf("%w: %d", format.ErrTooLarge, h.Size)))
	case int64(h.Size) > rest:
		return r.stop(EndTorn, format.Corrupt(r.base+r.pos+4, "size", fmt.Errorf("%w: entry of %d bytes, %d left in the file", format.ErrShort, h.Size, rest)))
	}
	e, err := r.bytes(r.pos, int(h.Size))
	if err != nil {
		return r.stop("", err)
	}
	r.body = e[BodyOffset:]
	r.pos += int64(h.Size)
	return true
}

func (r *Reader) stop(end string, err error) bool {
	r.end, r.err, r.done = end, err, true
	return false
}

// bytes returns n bytes at file position pos (valid until the next call).
func (r *Reader) bytes(pos int64, n int) ([]byte, error) {
	if r.bufAt >= 0 && pos >= r.bufAt && pos+int64(n) <= r.bufAt+int64(len(r.buf)) {
		return r.buf[pos-r.bufAt : pos-r.bufAt+int64(n)], nil
	}
	m := min(max(int64(readChunk), int64(n)), r.size-pos)
	if r.sl != nil {
		b, err := r.sl.Slice(pos, int(m))
		if err != nil || len(b) < n {
			r.bufAt = -1
			if err == nil || errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return nil, fmt.Errorf("reading data at %d: %w", r.base+pos, err)
		}
		r.buf, r.bufAt = b, pos
		return b[:n:n], nil
	}
	if int64(cap(r.buf)) < m {
		r.buf = make([]byte, m)
	}
	r.buf = r.buf[:m]
	k, err := r.ra.ReadAt(r.buf, pos)
	if k < n {
		r.bufAt = -1
		if err == nil || errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, fmt.Errorf("reading data at %d: %w", r.base+pos, err)
	}
	r.buf, r.bufAt = r.buf[:k], pos
	return r.buf[:n], nil
}

// Restart restarts the walk at file position pos (for a caller that found the
// next entry past a damaged one); End and Err are cleared.
func (r *Reader) Restart(pos int64) {
	r.pos, r.end, r.err, r.done = min(max(pos, 0), r.size), "", nil, false
}

// Header is the header of the entry Next just read (after an EndBad or
// EndTorn stop: of the rejected entry; after an error reading an entry's
// body: of that entry).
func (r *Reader) Header() Header { return r.h }

// HeaderRef is the Reader's own copy of Header, valid until the next
// Next or Restart: a caller that keeps a few fields of every entry reads
// them from it one by one, where a copy of the whole Header (Header's
// result) reads the fields Next has just stored one at a time with
// 16-byte loads, which wait for those stores to complete (perf: 14% of
// the DLedger walk's own samples on that copy).
func (r *Reader) HeaderRef() *Header { return &r.h }

// Body is the body of the entry Next just read; it aliases the reader's
// buffer and is valid until the next Next (over a Slicer: as long as the
// Slicer is).
func (r *Reader) Body() []byte { return r.body }

// Ahead is what the reader's current window holds from the next entry's
// start on (nil when the window does not reach it): bytes the next calls
// of Next will likely read, for a caller that prefetches them. It aliases
// the window, valid as Body is.
func (r *Reader) Ahead() []byte {
	if r.bufAt < 0 || r.pos < r.bufAt || r.pos >= r.bufAt+int64(len(r.buf)) {
		return nil
	}
	return r.buf[r.pos-r.bufAt:]
}

// Offset is the data offset of the next entry: after a stop, where the
// walk stopped.
func (r *Reader) Offset() int64 { return r.base + r.pos }

// End says why the walk stopped and at which file position ("" while it
// has not).
func (r *Reader) End() (string, int64) { return r.end, r.pos }

// Err is nil at a clean end, a *format.CorruptError for a rejected or
// torn entry, or an I/O error.
func (r *Reader) Err() error { return r.err }
