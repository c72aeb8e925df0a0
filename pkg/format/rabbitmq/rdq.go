package rabbitmq

// Shared message store record framing (§2.1), written by
// rabbit_msg_file:append/3 (≤3.12) and rabbit_msg_store writer_append/3
// (3.13+), read back by reader_pread_parse/1:
//
//	offset  size       field
//	0       8          Size    uint64 BE = 16 + len(Body)
//	8       16         MsgId   opaque
//	24      Size-16    Body    term_to_binary(Msg), first byte 0x83
//	8+Size  1          marker  0xFF once the write completed
//	TotalSize = Size + 9
//
// There is no file header, checksum or padding: records are back to back.

import (
	"encoding/binary"

	"github.com/storectl/storectl/pkg/format"
	"github.com/storectl/storectl/pkg/format/etf"
)

// Framing constants of an .rdq record.
const (
	RDQSizeFieldLen = 8    // the Size field
	RDQMsgIDLen     = 16   // the MsgId field
	RDQHeaderLen    = 24   // Size + MsgId, where the body starts
	RDQOverhead     = 9    // TotalSize - Size: the size field and the marker
	RDQWriteOK      = 0xFF // the marker byte after the body
	RDQMinSize      = 16   // smallest Size RabbitMQ's scanners accept (an empty body)
	// RDQMinStrictSize is the smallest Size of a real record: a 16-byte id
	// plus at least a 2-byte term (§3.5); RabbitMQ never writes an empty body.
	RDQMinStrictSize = 18
)

// DefaultMaxEntrySize bounds Size. RabbitMQ's hard message size cap is
// 512 MiB (MAX_MSG_SIZE in rabbit.hrl); the term adds properties and
// annotations around the payload, so 1 GiB rejects only impossible values.
const DefaultMaxEntrySize uint64 = 1 << 30

// Entry is one .rdq record. Body aliases the input slice.
type Entry struct {
	Offset    int64    // file offset of the Size field
	Size      uint64   // the Size field: 16 + len(Body); 0 means end of data
	TotalSize int64    // Size + 9, what the index stores
	MsgID     [16]byte // the store's message id
	Body      []byte   // the ETF body term (not validated here)
	WriteOK   bool     // marker byte is 0xFF
}

// IsEnd reports whether the entry is the end-of-data mark: a Size field of
// zero, where rabbit_msg_file:scan stops ("Nothing to do other than stop").
func (e *Entry) IsEnd() bool { return e.Size == 0 }

// DecodeEntry decodes the record that starts at b[0]. off is the file offset
// of b[0]; it is used for Entry.Offset and error offsets only. A Size of 0
// returns an end-of-data Entry (IsEnd) and no error. A marker other than
// 0xFF is not an error: it is reported as WriteOK == false. The body is not
// decoded; see Entry.CheckBody.
func DecodeEntry(b []byte, off int64, maxSize uint64) (Entry, error) {
	e := Entry{Offset: off}
	if len(b) < RDQSizeFieldLen {
		return e, format.Corrupt(off, "size", format.ErrShort)
	}
	e.Size = binary.BigEndian.Uint64(b)
	switch {
	case e.Size == 0:
		return e, nil
	case e.Size < RDQMinSize:
		return e, format.Corrupt(off, "size", format.ErrInvalid)
	case e.Size > maxSize:
		return e, format.Corrupt(off, "size", format.ErrTooLarge)
	case len(b) < RDQOverhead || e.Size > uint64(len(b)-RDQOverhead):
		return e, format.Corrupt(off, "size", format.ErrShort)
	}
	e.TotalSize = int64(e.Size) + RDQOverhead
	copy(e.MsgID[:], b[RDQSizeFieldLen:RDQHeaderLen])
	end := RDQSizeFieldLen + int(e.Size)
	e.Body = b[RDQHeaderLen:end:end]
	e.WriteOK = b[end] == RDQWriteOK
	return e, nil
}

// Frame is what the bytes at one position of an .rdq file say about a
// record starting there, as the evidence test (§3.5) weighs them.
type Frame struct {
	Size uint64 // the Size field
	// Fits: Size ≥ RDQMinStrictSize and the frame, marker included, ends
	// inside b. The other fields are set only then.
	Fits bool
	End  int  // offset in b of the marker byte
	OK   bool // the marker is RDQWriteOK
	// Term: the body starts with the ETF version byte and is exactly one
	// term (etf.IsExactTerm).
	Term bool
}

// Record reports whether the frame is a real record: it fits, its marker
// says the write completed and its body is one term.
func (f Frame) Record() bool { return f.Fits && f.OK && f.Term }

// StrictFrame reads the frame that would start at b[p] (0 ≤ p < len(b)),
// without copying or allocating: a scanner calls it at every byte of a
// file it searches for records. Frames too short for a size field have
// Size 0.
func StrictFrame(b []byte, p int) Frame {
	n := len(b)
	if n-p < RDQSizeFieldLen {
		return Frame{}
	}
	f := Frame{Size: binary.BigEndian.Uint64(b[p:])}
	if n-p < RDQOverhead+RDQMinStrictSize || f.Size < RDQMinStrictSize || f.Size > uint64(n-p-RDQOverhead) {
		return f
	}
	f.Fits, f.End = true, p+RDQSizeFieldLen+int(f.Size)
	f.OK = b[f.End] == RDQWriteOK
	f.Term = b[p+RDQHeaderLen] == 0x83 && exactBody(b[p+RDQHeaderLen:f.End])
	return f
}

// CheckBody validates the body as exactly one ETF term (what
// reader_pread_parse's binary_to_term would accept, within this decoder's
// limits). Errors carry absolute file offsets.
func (e *Entry) CheckBody() error {
	base := e.Offset + RDQHeaderLen
	n, err := etf.SkipAt(e.Body, base)
	if err != nil {
		return err
	}
	if n != len(e.Body) {
		return format.Corrupt(base+int64(n), "body", format.ErrInvalid)
	}
	return nil
}

// Evidence is a set of facts about a candidate record at some position.
type Evidence uint8

// Evidence flags, from weakest to strongest (§3.5 recommended test).
const (
	EvSizeMin   Evidence = 1 << iota // Size ≥ 18 (16-byte id + a 2-byte term)
	EvFits                           // the whole frame lies inside the data
	EvMarker                         // the byte after the body is 0xFF
	EvETFMagic                       // the body starts with 0x83
	EvExactTerm                      // the body is exactly one valid ETF term

	// EvAll is every flag: the strict candidate test of §3.5.
	EvAll = EvSizeMin | EvFits | EvMarker | EvETFMagic | EvExactTerm
)

// Has reports whether all flags in f are set.
func (e Evidence) Has(f Evidence) bool { return e&f == f }

// String lists the flags, e.g. "size,fits,marker".
func (e Evidence) String() string {
	names := [...]string{"size", "fits", "marker", "etf-magic", "etf-term"}
	s := ""
	for i, n := range names {
		if e&(1<<i) != 0 {
			if s != "" {
				s += ","
			}
			s += n
		}
	}
	if s == "" {
		return "none"
	}
	return s
}

// Candidate describes the frame a scanner would see at one position.
type Candidate struct {
	Offset   int64    // file offset of the size field
	Size     uint64   // the 8-byte window read as a size
	MsgID    [16]byte // valid when EvFits is set
	Evidence Evidence // which checks passed
}

// CheckCandidate evaluates the frame starting at b[pos]; base is the file
// offset of b[0]. Checks after a failed EvFits are not evaluated. It does
// not allocate.
func CheckCandidate(b []byte, pos int, base int64) Candidate {
	c := Candidate{Offset: base + int64(pos)}
	if pos < 0 || pos > len(b) || len(b)-pos < RDQSizeFieldLen {
		return c
	}
	rest := b[pos:]
	c.Size = binary.BigEndian.Uint64(rest)
	if c.Size >= RDQMinStrictSize {
		c.Evidence |= EvSizeMin
	}
	if c.Size < RDQMinSize || len(rest) < RDQOverhead || c.Size > uint64(len(rest)-RDQOverhead) {
		return c
	}
	c.Evidence |= EvFits
	copy(c.MsgID[:], rest[RDQSizeFieldLen:RDQHeaderLen])
	end := RDQSizeFieldLen + int(c.Size)
	if rest[end] == RDQWriteOK {
		c.Evidence |= EvMarker
	}
	body := rest[RDQHeaderLen:end]
	if len(body) > 0 && body[0] == etf.Version {
		c.Evidence |= EvETFMagic
		if exactBody(body) {
			c.Evidence |= EvExactTerm
		}
	}
	return c
}
