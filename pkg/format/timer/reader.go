package timer

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/storectl/storectl/pkg/format"
)

// readChunk is how much of a file a LogReader reads at once: whole units,
// about 1 MiB.
const readChunk = (1 << 20) / UnitSize * UnitSize

// LogReader walks one timerlog file in 52-byte steps from position 0, as
// TimerMessageStore.recoverAndRevise does. Use it like bufio.Scanner:
//
//	r := timer.NewLogReader(f, size, base)
//	for r.Next() { e := r.Entry(); ... }
//	if err := r.Err(); err != nil { ... }
//
// Next stops after a BLANK, at all-zero bytes, at a unit recovery rejects
// (Entry().Kind == EntryBad, Err a *format.CorruptError) and at the end of
// the file. Offsets are timerlog offsets: base plus the file position.
type LogReader struct {
	ra    io.ReaderAt
	size  int64
	base  int64
	pos   int64 // file position of the current entry
	next  int64 // file position of the next entry
	buf   []byte
	bufAt int64 // file position of buf[0]
	end   int64 // file position past the last accepted unit
	e     Entry
	err   error
	done  bool
	// Tail is the number of bytes from the last step to the end of the
	// file that were too few for a unit (set once Next returns false).
	Tail int64
}

// NewLogReader returns a reader over a timerlog file of size bytes whose
// first byte is at timerlog offset base.
func NewLogReader(ra io.ReaderAt, size, base int64) *LogReader {
	return &LogReader{ra: ra, size: size, base: base, bufAt: -1}
}

// Next reads the next entry. It returns false at the end (see LogReader)
// and on an I/O error.
func (r *LogReader) Next() bool {
	if r.done {
		return false
	}
	r.pos = r.next
	rest := r.size - r.pos
	if rest < BlankSize {
		r.Tail, r.done = max(rest, 0), true
		return false
	}
	want := int64(UnitSize)
	if rest < want {
		want = rest
	}
	b, err := r.bytes(r.pos, int(want))
	if err != nil {
		r.err, r.done = err, true
		return false
	}
	if want == UnitSize {
		// A unit recovery accepts (DecodeEntry's EntryUnit: not the
		// BLANK magic, size 52, a magic within 0xF), decoded in place.
		be := binary.BigEndian
		if magic := int32(be.Uint32(b[unitMagicOff:])); magic != BlankMagic && be.Uint32(b) == UnitSize && MagicOK(magic) {
			r.e.Kind, r.e.Rest = EntryUnit, 0
			DecodeUnitTo(&r.e.Unit, (*[UnitSize]byte)(b), r.base+r.pos)
			r.next = r.pos + UnitSize
			r.end = r.next
			return true
		}
	}
	e, derr := DecodeEntry(b, r.base+r.pos)
	if derr != nil && !isCorrupt(derr) {
		r.err, r.done = derr, true
		return false
	}
	if want < UnitSize && e.Kind != EntryBlank {
		// Fewer than 52 bytes left and no BLANK: recovery's getInt/getLong
		// reads stop here too.
		r.Tail, r.done = rest, true
		return false
	}
	r.e = e
	switch e.Kind {
	case EntryUnit:
		r.next = r.pos + UnitSize
		r.end = r.next
		return true
	case EntryBad:
		r.err, r.done = derr, true
		return true
	}
	r.done = true // blank or zero: the end of this file's units
	return true
}

// isCorrupt reports whether err is a *format.CorruptError (a function of
// its own: the pointer errors.As fills would otherwise be allocated on
// every Next).
func isCorrupt(err error) bool {
	var ce *format.CorruptError
	return errors.As(err, &ce)
}

// bytes returns n bytes at file position pos, reading ahead in chunks.
func (r *LogReader) bytes(pos int64, n int) ([]byte, error) {
	if r.bufAt >= 0 && pos >= r.bufAt && pos+int64(n) <= r.bufAt+int64(len(r.buf)) {
		return r.buf[pos-r.bufAt : pos-r.bufAt+int64(n)], nil
	}
	m := min(int64(readChunk), r.size-pos)
	if cap(r.buf) < int(m) {
		r.buf = make([]byte, m)
	}
	r.buf = r.buf[:m]
	k, err := r.ra.ReadAt(r.buf, pos)
	if k < n {
		if err == nil || err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		r.bufAt = -1
		return nil, fmt.Errorf("reading timerlog at %d: %w", r.base+pos, err)
	}
	r.buf, r.bufAt = r.buf[:k], pos
	return r.buf[:n], nil
}

// Entry is the entry Next just read; its Unit is a copy.
func (r *LogReader) Entry() Entry { return r.e }

// Current is the entry Next just read, in place: valid until the next
// call to Next (a walk that looks at each unit once need not copy it).
func (r *LogReader) Current() *Entry { return &r.e }

// Offset is the timerlog offset of the entry Next just read.
func (r *LogReader) Offset() int64 { return r.base + r.pos }

// End is the file position just past the last unit recovery accepted so
// far (0 before the first): where a BLANK, zeros or a rejected unit sit.
func (r *LogReader) End() int64 { return r.end }

// Err is nil at a clean end; a *format.CorruptError after an EntryBad
// entry; an I/O error otherwise.
func (r *LogReader) Err() error { return r.err }
