package ra

// The ra write-ahead log (ra_log_wal.erl, identical in ra 2.2.0, 2.14.0
// and 2.16.13): a 5-byte header, then records back to back, no padding:
//
//	"RAWA" | Version:8 (= 1)
//	record, first of its writer in this file (inline UId):
//	  T:1 | 0:1 | WriterRef:22 | UIdLen:16 | UId | Checksum:32 | DataLen:32 | Index:64 | Term:64 | Data
//	record, later ones of the same writer (reference):
//	  T:1 | 1:1 | WriterRef:22 | Checksum:32 | DataLen:32 | Index:64 | Term:64 | Data
//
// Checksum is Adler-32 over Index | Term | Data (0: not computed). T set
// means the entry truncates its writer's log at Index (written after a
// snapshot install or a leader change). Data is the ETF of the ra entry.

import (
	"encoding/binary"

	"github.com/storectl/storectl/internal/adler32x"
	"github.com/storectl/storectl/pkg/format"
)

// WAL file constants.
const (
	WALMagic     = "RAWA"
	WALVersion   = 1
	WALHeaderLen = 5
	// WALFixedLen is the part of every record after the writer id:
	// checksum, data length, index and term.
	WALFixedLen = 24
	// MaxWriterRef is the largest 22-bit writer reference.
	MaxWriterRef = 1<<22 - 1
	// walLastRecordProbe is how many bytes after a record whose checksum
	// fails ra reads to decide it was the last one (is_last_record: 13
	// zero bytes, or fewer than 13 bytes left).
	walLastRecordProbe = 13
)

// WALRecord is one decoded WAL record. UID and Data alias the bytes the
// record was decoded from.
type WALRecord struct {
	Offset    int64  // file offset of the record's first byte
	HeaderLen int    // bytes before Data: writer id, inline UId, and the 24 fixed bytes
	Truncate  bool   // the T bit
	IsRef     bool   // the writer is given by reference (UId not inline)
	WriterRef uint32 // the 22-bit per-file writer number
	UID       []byte // the writer's UId: inline, or resolved from WriterRef
	Checksum  uint32 // Adler-32 as stored; 0 = not computed
	Index     uint64
	Term      uint64
	DataLen   uint32 // the stored length of Data
	Data      []byte // ETF of the entry; nil when it did not decode
}

// Size is the record's length in the file.
func (r *WALRecord) Size() int64 { return int64(r.HeaderLen) + int64(r.DataLen) }

// End is the file offset just after the record.
func (r *WALRecord) End() int64 { return r.Offset + r.Size() }

// ComputeChecksum is the Adler-32 ra computes for the record.
func (r *WALRecord) ComputeChecksum() uint32 {
	return WALChecksum(r.Index, r.Term, r.Data)
}

// ChecksumOK reports whether ra's validate_checksum accepts the record:
// a stored 0 means "not computed" and always passes.
func (r *WALRecord) ChecksumOK() bool {
	return r.Checksum == 0 || r.Checksum == r.ComputeChecksum()
}

// WALChecksum is erlang:adler32(<<Index:64, Term:64, Data/binary>>).
func WALChecksum(index, term uint64, data []byte) uint32 {
	var it [16]byte
	binary.BigEndian.PutUint64(it[:8], index)
	binary.BigEndian.PutUint64(it[8:], term)
	return adler32x.Update(adler32x.Checksum(it[:]), data)
}

// DecodeWALHeader checks the 5-byte file header. Like ra's
// open_at_first_record, fewer than 5 bytes is ErrShort (ra exits with a
// case_clause), and any other magic or version is ErrMagic/ErrUnsupported
// (ra exits with unknown_wal_file_format).
func DecodeWALHeader(b []byte) error {
	if len(b) < WALHeaderLen {
		return format.Corrupt(int64(len(b)), "header", format.ErrShort)
	}
	if string(b[:4]) != WALMagic {
		return format.Corrupt(0, "magic", format.ErrMagic)
	}
	if b[4] != WALVersion {
		return format.Corrupt(4, "version", format.ErrUnsupported)
	}
	return nil
}

// AppendWALHeader appends "RAWA" and version 1.
func AppendWALHeader(b []byte) []byte { return append(b, WALMagic+"\x01"...) }

// IsWALZeroRecord reports whether b starts with what ra takes for the end
// of a pre-allocated file: a zero writer id with an inline UId, then a
// zero checksum and a zero length. ok is false when b is too short to
// tell (ra then reads on, and at end of file stops as for a torn record).
func IsWALZeroRecord(b []byte) (zero, ok bool) {
	if len(b) < 5 {
		return false, false
	}
	if b[0] != 0 || b[1] != 0 || b[2] != 0 {
		return false, true
	}
	n := int(binary.BigEndian.Uint16(b[3:5]))
	if len(b) < 5+n+8 {
		return false, false
	}
	p := b[5+n:]
	return binary.BigEndian.Uint64(p[:8]) == 0, true
}

// WALWriters resolves writer references while decoding one file: ref ->
// UId, filled by the inline records. The zero value is ready to use.
type WALWriters struct {
	m map[uint32][]byte
}

// Lookup returns the UId of writer ref.
func (w *WALWriters) Lookup(ref uint32) ([]byte, bool) {
	u, ok := w.m[ref]
	return u, ok
}

// Len is the number of writers seen.
func (w *WALWriters) Len() int { return len(w.m) }

func (w *WALWriters) set(ref uint32, uid []byte) {
	if w.m == nil {
		w.m = map[uint32][]byte{}
	}
	if old, ok := w.m[ref]; ok && string(old) == string(uid) {
		return
	}
	w.m[ref] = append([]byte(nil), uid...)
}

// DecodeWALRecord decodes the record at b[0], whose file offset is off.
// Inline records register their writer in ws; reference records are
// resolved through it (an unknown reference is ErrInvalid at
// "writer_ref": ra 2.2.0-2.14 crash on it with a badmatch, 2.16 skips the
// record). A record that runs past the end of b is ErrShort: at the end
// of a file that is a torn record, which ra drops silently. The checksum
// is not checked here (ChecksumOK).
func DecodeWALRecord(b []byte, off int64, ws *WALWriters) (WALRecord, error) {
	r := WALRecord{Offset: off}
	c := format.Cursor{B: b}
	p := c.Take("writer", 3)
	if c.Failed() {
		return r, c.Err(off)
	}
	w := uint32(p[0])<<16 | uint32(p[1])<<8 | uint32(p[2])
	r.Truncate = w&(1<<23) != 0
	r.IsRef = w&(1<<22) != 0
	r.WriterRef = w & MaxWriterRef
	if !r.IsRef {
		n := int(c.U16("uid_len"))
		r.UID = c.Take("uid", n)
	}
	r.Checksum = c.U32("checksum")
	r.DataLen = c.U32("data_len")
	r.Index = c.U64("index")
	r.Term = c.U64("term")
	r.HeaderLen = c.Off
	if int64(r.DataLen) > int64(c.Remaining()) {
		c.Fail("data", format.ErrShort)
	}
	r.Data = c.Take("data", int(r.DataLen))
	if c.Failed() {
		return r, c.Err(off)
	}
	if r.IsRef {
		u, ok := ws.Lookup(r.WriterRef)
		if !ok {
			return r, format.Corrupt(off, "writer_ref", format.ErrInvalid)
		}
		r.UID = u
	} else {
		ws.set(r.WriterRef, r.UID)
	}
	return r, nil
}

// AppendWALRecord appends r in ra's encoding (inline UId unless r.IsRef)
// with r.Checksum as given: set it to r.ComputeChecksum() first for a
// record ra accepts, or leave 0 as ra writes with compute_checksums off.
func AppendWALRecord(b []byte, r WALRecord) []byte {
	w := r.WriterRef & MaxWriterRef
	if r.Truncate {
		w |= 1 << 23
	}
	if r.IsRef {
		w |= 1 << 22
	}
	b = append(b, byte(w>>16), byte(w>>8), byte(w))
	if !r.IsRef {
		b = binary.BigEndian.AppendUint16(b, uint16(len(r.UID)))
		b = append(b, r.UID...)
	}
	b = binary.BigEndian.AppendUint32(b, r.Checksum)
	b = binary.BigEndian.AppendUint32(b, uint32(len(r.Data)))
	b = binary.BigEndian.AppendUint64(b, r.Index)
	b = binary.BigEndian.AppendUint64(b, r.Term)
	return append(b, r.Data...)
}

// IsLastWALRecord applies ra's is_last_record to the bytes that follow a
// record whose checksum failed (rest, up to end of file): the record
// counts as the last one, and recovery stops there without error, when
// fewer than 13 bytes follow or the next 13 are zero (ra >= 2.0.13).
// Otherwise ra throws wal_checksum_validation_failure.
func IsLastWALRecord(rest []byte) bool {
	if len(rest) < walLastRecordProbe {
		return true
	}
	for _, c := range rest[:walLastRecordProbe] {
		if c != 0 {
			return false
		}
	}
	return true
}
