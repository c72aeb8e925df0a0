package rocketmq

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/storectl/storectl/pkg/format"
)

// ErrStale is the cause of a record whose stored PHYSICALOFFSET is not
// where it sits: a record left over from an earlier life of a reused
// commitlog file (apache/rocketmq #10017; docs/formats/rocketmq.md §3.6),
// matched with errors.Is.
var ErrStale = errors.New("stored physical offset does not match position")

// CheckMessage decodes the record at b[0], which sits at physical offset
// phy, and applies every check that needs nothing but the record:
// structure (DecodeMessage), body CRC and property CRC (Message.Verify)
// and stored PHYSICALOFFSET == phy. A BLANK record passes. The error is a
// *format.CorruptError with physical offsets; a failed offset check wraps
// ErrStale, a failed CRC format.ErrChecksum.
func CheckMessage(b []byte, phy int64, maxSize int) (Message, error) {
	var m Message
	err := CheckMessageInto(&m, b, phy, maxSize)
	return m, err
}

// CheckMessageInto is CheckMessage into *m (DecodeMessageInto), for a
// walk that reuses one Message.
func CheckMessageInto(m *Message, b []byte, phy int64, maxSize int) error {
	if err := DecodeMessageInto(m, b, phy, maxSize); err != nil || m.IsBlank() {
		return err
	}
	if err := m.Verify(); err != nil {
		return err
	}
	if m.PhysicalOffset != phy {
		return format.Corrupt(phy+28, "physicalOffset", fmt.Errorf("%w: stored %d", ErrStale, m.PhysicalOffset))
	}
	return nil
}

// IsFramed reports whether err, from CheckMessage, left the record's frame
// intact: only a checksum or the offset check failed, so TotalSize can be
// trusted and the next record starts right after it.
func IsFramed(err error) bool {
	return errors.Is(err, format.ErrChecksum) || errors.Is(err, ErrStale)
}

// DefaultReadWindow is the Reader's read size: large enough to amortise
// the reads (2048 per GiB), small enough that the copy out of the page
// cache is still in the CPU's L2 cache when the CRC pass reads it. A
// larger record gets a window of its own size.
const DefaultReadWindow = 512 << 10

// Reader reads the records of one commitlog file through an io.ReaderAt,
// in the style of prometheus tsdb/wlog.Reader and archive/zip.NewReader:
// one reusable window of DefaultReadWindow bytes, read in file order, so
// memory does not grow with the file (or, when the io.ReaderAt is also a
// Slicer, windows of the same size taken in place from a mapping). Use it like bufio.Scanner:
//
//	r := rocketmq.NewReader(f, size, base, 0)
//	for r.Next() {
//		m := r.Message() // valid until the next call of Next
//	}
//	if err := r.Err(); err != nil { ... } // *format.CorruptError or I/O
//
// Next stops at the end of the file, at a BLANK record (the filler that
// closes a full file) and at the first record that fails CheckMessage;
// End says which. What lies past a failure (a zero tail, a torn write,
// garbage and records beyond it) is for the caller to judge;
// LastNonZero, Resync, RecordBytes, CheckMessage and Restart are the
// tools for that.
//
// Offsets handed to and returned by the Reader are file offsets;
// messages and errors carry physical offsets (base + file offset).
type Reader struct {
	ra      io.ReaderAt
	sl      Slicer   // ra's bytes in place, when it offers them
	ext     Extenter // ra's data extents, when it knows them
	extOff  [2]int64 // the last extent ext returned: [start, end)
	size    int64
	base    int64
	maxSize int
	window  int
	buf     []byte // the reusable window buffer
	data    []byte // current window: the file's bytes [start, start+len(data))
	start   int64
	maxRead int64
	off     int64 // the current record (after a Next that returned false: the one that stopped it)
	advance int64 // size of the valid record at off: the next Next starts after it
	m       Message
	raw     []byte // bytes from the stopping record's offset (view into data)
	end     End
	err     error
}

// End says why Reader.Next returned false.
type End int

const (
	EndNone    End = iota // Next has not returned false yet
	EndEOF                // the last record ends exactly at the end of the file
	EndBlank              // a BLANK record at Offset
	EndCorrupt            // the record at Offset failed CheckMessage (Err is a *format.CorruptError)
	EndIO                 // a read failed (Err)
)

// NewReader returns a Reader over the size bytes of ra, a commitlog file
// whose first byte is at physical offset base (its name). maxSize bounds
// a record's TOTALSIZE (DefaultMaxRecordSize when <= 0).
func NewReader(ra io.ReaderAt, size, base int64, maxSize int) *Reader {
	if maxSize <= 0 {
		maxSize = DefaultMaxRecordSize
	}
	r := &Reader{ra: ra, size: size, base: base, maxSize: maxSize, window: DefaultReadWindow}
	r.ext, _ = ra.(Extenter)
	r.sl, _ = ra.(Slicer)
	return r
}

// Slicer is what an io.ReaderAt over a file mapped into memory may also
// implement: Slice returns the file's bytes [off, off+n) in place, with
// no copy (n <= the file's size - off). The Reader then takes its windows
// from Slice instead of reading them into its buffer: the same bytes, so
// the same walk, without the copy out of the page cache. The bytes are
// only read, and must stay valid at least until the next Slice (the
// caller that mapped the file keeps them until it closes it, and guards
// the walk against a file that shrinks under the mapping).
type Slicer interface {
	Slice(off int64, n int) ([]byte, error)
}

// Extenter is what an io.ReaderAt over a sparse file may also implement:
// DataExtent returns the first extent [start, end) that may hold data and
// ends after off (start may lie below off); start >= the file's size when
// no data follows off. Bytes outside the extents read as zeros. With it,
// LastNonZero and Resync skip the holes instead of reading their zeros (a
// 1 TiB commitlog file made by truncate -s is one hole). An error means
// the extents are unknown: everything is read.
type Extenter interface {
	DataExtent(off int64) (start, end int64, err error)
}

// dataFrom returns the first offset in [p, to) that may hold data, or a
// value >= to when [p, to) is a hole. Without an Extenter it is p.
func (r *Reader) dataFrom(p, to int64) int64 {
	if r.ext == nil {
		return p
	}
	if p < r.extOff[0] || p >= r.extOff[1] {
		s, e, err := r.ext.DataExtent(p)
		if err != nil {
			r.ext = nil // unknown extents: read everything from now on
			return p
		}
		r.extOff = [2]int64{s, e}
		if e <= p { // a misbehaving Extenter: take it as data
			r.extOff = [2]int64{p, p + 1}
		}
	}
	return max(p, r.extOff[0])
}

// Size is the file size the Reader was made with.
func (r *Reader) Size() int64 { return r.size }

// Base is the physical offset of the file's first byte.
func (r *Reader) Base() int64 { return r.base }

// Next decodes and checks the record at Offset. It returns true for a
// valid message (Message, then Offset advances past it on the next call)
// and false at the end of the walk (see End and Err).
func (r *Reader) Next() bool {
	if r.end != EndNone {
		return false
	}
	r.off, r.advance = r.off+r.advance, 0
	b, err := r.RecordBytes(r.off)
	if err != nil || len(b) == 0 {
		r.m = Message{}
		r.end, r.err = EndEOF, nil
		if err != nil {
			r.end, r.err = EndIO, err
		}
		return false
	}
	err = CheckMessageInto(&r.m, b, r.base+r.off, r.maxSize)
	switch {
	case err != nil:
		r.end, r.err, r.raw = EndCorrupt, err, b
		return false
	case r.m.IsBlank():
		r.end, r.raw = EndBlank, b
		return false
	}
	r.advance = int64(r.m.TotalSize)
	return true
}

// Message is the record the last Next decoded: the valid message after
// true; after EndCorrupt, what could be decoded of the failing record
// (its TotalSize and Magic at least, when the file held 8 bytes there).
// It aliases the Reader's window: copy what must outlive the next call.
func (r *Reader) Message() *Message { return &r.m }

// Offset is the file offset of the record Message describes (after
// true) or of the record that stopped the walk (after false).
func (r *Reader) Offset() int64 { return r.off }

// End says why Next returned false (EndNone while it has not).
func (r *Reader) End() End { return r.end }

// Err is nil at EndEOF and EndBlank, the *format.CorruptError (physical
// offsets, no path) at EndCorrupt, the read error at EndIO.
func (r *Reader) Err() error { return r.err }

// Raw is the file's bytes from the stopping record's offset to the end of
// the current window (at least the record's TotalSize when that is a
// plausible size and the file holds it), after Next returned false at
// EndCorrupt or EndBlank. It aliases the window.
func (r *Reader) Raw() []byte { return r.raw }

// MaxRead is the furthest file offset any read reached (bytes scanned).
func (r *Reader) MaxRead() int64 { return r.maxRead }

// Restart makes the next Next start a fresh walk at file offset off (for a
// walk past a failure).
func (r *Reader) Restart(off int64) {
	r.off, r.advance, r.m, r.raw, r.end, r.err = off, 0, Message{}, nil, EndNone, nil
}

// Bytes returns the file's bytes from off to at least min(off+want,
// Size), reusing the current window when it covers them, else reading a
// window of max(want, DefaultReadWindow) bytes from off. The slice runs
// to the end of the window and is valid until the next read. Past the
// end of the file it is empty. want must already be bounded (by maxSize
// or the window): it sizes the buffer.
func (r *Reader) Bytes(off int64, want int) ([]byte, error) {
	if off < 0 || off >= r.size {
		return nil, nil
	}
	end := r.start + int64(len(r.data))
	if r.data != nil && off >= r.start && (off+int64(want) <= end || end == r.size) {
		return r.data[off-r.start:], nil
	}
	n := min(int64(max(want, r.window)), r.size-off)
	if r.sl != nil {
		r.data = nil
		b, err := r.sl.Slice(off, int(n))
		if err != nil {
			return nil, err
		}
		if int64(len(b)) < n {
			return nil, io.ErrUnexpectedEOF
		}
		r.data, r.start = b[:n:n], off
		r.maxRead = max(r.maxRead, off+n)
		return r.data, nil
	}
	if int64(cap(r.buf)) < n {
		r.buf = make([]byte, n)
	}
	b := r.buf[:n]
	r.data = nil
	got, err := r.ra.ReadAt(b, off)
	if int64(got) < n {
		if err == nil || err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	r.data, r.start = b, off
	r.maxRead = max(r.maxRead, off+n)
	return b, nil
}

// RecordBytes returns the bytes from off covering the record there: its
// TOTALSIZE when that is a plausible size (at most maxSize), else at
// least 8 bytes; cut only by the end of the file. Asking for the record's
// own size, not maxSize, lets one window serve many records.
func (r *Reader) RecordBytes(off int64) ([]byte, error) {
	b, err := r.Bytes(off, 8)
	if err != nil || len(b) < 4 {
		return b, err
	}
	if ts := int32(binary.BigEndian.Uint32(b)); int(ts) > len(b) && int(ts) <= r.maxSize {
		return r.Bytes(off, int(ts))
	}
	return b, nil
}

// LastNonZero returns the file offset of the last non-zero byte in
// [from, to), or -1 when the range is all zeros.
func (r *Reader) LastNonZero(from, to int64) (int64, error) {
	last := int64(-1)
	for p := from; p < to; {
		if p = r.dataFrom(p, to); p >= to {
			break
		}
		b, err := r.Bytes(p, r.window)
		if err != nil {
			return -1, err
		}
		if len(b) == 0 {
			break
		}
		if int64(len(b)) > to-p {
			b = b[:to-p]
		}
		if i := format.LastNonZero(b); i >= 0 {
			last = p + int64(i)
		}
		p += int64(len(b))
	}
	return last, nil
}

var magicPrefix = []byte{0xDA, 0xA3, 0x20}

// Resync searches [from, Size) for the first offset where a message
// passes CheckMessage (a candidate magic first, then the whole check),
// and returns it, or -1 when there is none.
func (r *Reader) Resync(from int64) (int64, error) {
	p := from
	for p+MinRecordSize <= r.size {
		// A record starting up to 8 bytes before data (its size's zero
		// high bytes in the hole) is still found.
		if d := r.dataFrom(p, r.size); d >= r.size {
			return -1, nil
		} else if d-8 > p {
			p = d - 8
		}
		b, err := r.Bytes(p, r.window)
		if err != nil {
			return -1, err
		}
		if len(b) < 8 {
			return -1, nil
		}
		i := bytes.Index(b[4:], magicPrefix)
		if i < 0 {
			if int64(len(b)) >= r.size-p {
				return -1, nil
			}
			p += max(1, int64(len(b))-8) // keep an overlap so a split magic is not missed
			continue
		}
		cand := p + int64(i)
		if j := i + 4 + 3; j < len(b) && (b[j] == 0xA7 || b[j] == 0xAB) {
			rb, err := r.RecordBytes(cand)
			if err != nil {
				return -1, err
			}
			if m, err := CheckMessage(rb, r.base+cand, r.maxSize); err == nil && !m.IsBlank() {
				return cand, nil
			}
		}
		p = cand + 1
	}
	return -1, nil
}

// ReadMessageAt reads and checks (CheckMessage) the record at file offset
// off of the size bytes of ra, a commitlog file whose first byte is at
// physical offset base, for random access to single records. The message
// owns its bytes. The read is bounded by maxSize and the file before
// anything is allocated. Corruption is a *format.CorruptError with
// physical offsets; anything else is a read error.
func ReadMessageAt(ra io.ReaderAt, size, base, off int64, maxSize int) (Message, error) {
	if maxSize <= 0 {
		maxSize = DefaultMaxRecordSize
	}
	phy := base + off
	var hdr [8]byte
	n := 0
	var err error
	if off >= 0 && off < size {
		n, err = ra.ReadAt(hdr[:min(int64(len(hdr)), size-off)], off)
	}
	if n < len(hdr) {
		if err != nil && err != io.EOF {
			return Message{}, err
		}
		return DecodeMessage(hdr[:n], phy, maxSize) // too short for a record: ErrShort
	}
	total := int64(int32(binary.BigEndian.Uint32(hdr[:])))
	want := min(max(total, 8), int64(maxSize), size-off) // bounded before allocating
	buf := make([]byte, want)
	if n, err := ra.ReadAt(buf, off); int64(n) < want {
		if err == nil || err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return Message{}, err
	}
	return CheckMessage(buf, phy, maxSize)
}
