package ra

import (
	"errors"
	"io"

	"github.com/storectl/storectl/pkg/format"
)

// How a WAL's records end (WALReader.End). The names are those of ra's
// recovery cases.
const (
	WALEndEOF     = "eof"            // the last record ends at end of file
	WALEndPartial = "partial_record" // a record cut short by end of file: ra drops it silently
	WALEndZero    = "zero_record"    // a zero header: the end of a pre-allocated file
)

// walMaxHead is the longest record head: writer id, UId length, a 65535
// byte UId and the fixed fields.
const walMaxHead = 3 + 2 + 65535 + WALFixedLen

// WALReader reads the records of one WAL file in order, the way ra's
// recover_records walks it, over an io.ReaderAt. Every record that frames
// is returned, whatever its checksum (WALRecord.ChecksumOK, IsLast); a
// reference to a writer the file has not defined comes back with a nil
// UID. Reading stops at the end of the data (End) or at an I/O error or
// a bad file header (Err).
type WALReader struct {
	win  window
	size int64

	started bool
	pos     int64 // offset of the next record
	ws      WALWriters
	rec     WALRecord

	end    string
	endOff int64
	err    error
}

// NewWALReader returns a reader over the size bytes of r.
func NewWALReader(r io.ReaderAt, size int64) *WALReader {
	return &WALReader{win: window{r: r, size: size}, size: size}
}

// Next advances to the next record.
func (w *WALReader) Next() bool {
	if w.err != nil || w.end != "" {
		return false
	}
	if !w.started {
		w.started = true
		b, err := w.win.at(0, WALHeaderLen)
		if err != nil {
			w.err = err
			return false
		}
		if err := DecodeWALHeader(b[:min(len(b), WALHeaderLen)]); err != nil {
			w.err = err
			return false
		}
		w.pos = WALHeaderLen
	} else {
		w.pos = w.rec.End()
	}
	b, err := w.win.at(w.pos, walMaxHead)
	if err != nil {
		w.err = err
		return false
	}
	if len(b) == 0 {
		w.setEnd(WALEndEOF)
		return false
	}
	if zero, _ := IsWALZeroRecord(b); zero {
		w.setEnd(WALEndZero)
		return false
	}
	head, err := DecodeWALRecord(b[:min(len(b), walMaxHead)], w.pos, &w.ws)
	if isShortData(err) {
		// the head frames but the data runs past the window
		size := head.Size()
		if w.pos+size > w.size {
			w.setEnd(WALEndPartial)
			return false
		}
		if b, err = w.win.at(w.pos, int(size)); err != nil {
			w.err = err
			return false
		}
		head, err = DecodeWALRecord(b[:size], w.pos, &w.ws)
	}
	if err != nil {
		// (ce only here: errors.As makes it escape, a heap object per
		// record when it was declared for every record)
		var ce *format.CorruptError
		switch {
		case errors.As(err, &ce) && ce.Field == "writer_ref":
			head.UID = nil
		case errors.Is(err, format.ErrShort):
			w.setEnd(WALEndPartial)
			return false
		default:
			w.err = err
			return false
		}
	}
	w.rec = head
	return true
}

// isShortData reports whether err is a record head that framed but whose
// data ran past the window.
func isShortData(err error) bool {
	if err == nil {
		return false
	}
	var ce *format.CorruptError
	return errors.As(err, &ce) && ce.Field == "data" && errors.Is(err, format.ErrShort)
}

func (w *WALReader) setEnd(reason string) {
	w.end = reason
	w.endOff = w.pos
}

// Record is the current record. Its UID and Data are valid until the
// next call of Next.
func (w *WALReader) Record() *WALRecord { return &w.rec }

// IsLast applies ra's is_last_record to the current record: true when
// fewer than 13 bytes follow it or the next 13 are zero. ra tolerates a
// checksum failure (drops the record and stops) only then.
func (w *WALReader) IsLast() bool {
	b, err := w.win.at(w.rec.End(), walLastRecordProbe)
	if err != nil {
		return false
	}
	return IsLastWALRecord(b[:min(len(b), walLastRecordProbe)])
}

// End says how the records ended and at which offset: WALEndEOF,
// WALEndPartial (a torn record starts there) or WALEndZero; "" while
// reading or after an error.
func (w *WALReader) End() (reason string, off int64) { return w.end, w.endOff }

// Err is the I/O error or header corruption that stopped the reader.
func (w *WALReader) Err() error { return w.err }

// Writers is the writer table built so far.
func (w *WALReader) Writers() *WALWriters { return &w.ws }

// BytesRead is how many bytes were read from the file.
func (w *WALReader) BytesRead() int64 { return w.win.read }
