package osiris

import (
	"github.com/storectl/storectl/pkg/format"
)

// IndexRecord is one 29-byte record of an index file: osiris appends one
// per chunk, right after the chunk (write_chunk v1.8.5 2390-2422).
type IndexRecord struct {
	ChunkID   uint64
	Timestamp int64
	Epoch     uint64
	FilePos   uint32 // offset of the chunk header in the segment
	Type      ChunkType
}

// IsZero reports an all-zero record (osiris' ?ZERO_IDX_MATCH: preallocated
// or zero-filled space that recovery skips).
func (r IndexRecord) IsZero() bool { return r == IndexRecord{} }

// IndexRecordFor is the record osiris writes for chunk h at pos.
func IndexRecordFor(h ChunkHeader, pos int64) IndexRecord {
	return IndexRecord{ChunkID: h.ChunkID, Timestamp: h.Timestamp, Epoch: h.Epoch, FilePos: uint32(pos), Type: h.Type}
}

// DecodeIndexRecord decodes the record at the start of b.
func DecodeIndexRecord(b []byte, off int64) (IndexRecord, error) {
	if len(b) < IndexRecordSize {
		return IndexRecord{}, format.Corrupt(off, "index record", format.ErrShort)
	}
	return IndexRecord{
		ChunkID:   be.Uint64(b),
		Timestamp: int64(be.Uint64(b[8:])),
		Epoch:     be.Uint64(b[16:]),
		FilePos:   be.Uint32(b[24:]),
		Type:      ChunkType(b[28]),
	}, nil
}

// AppendIndexRecord appends the 29-byte encoding of r.
func AppendIndexRecord(dst []byte, r IndexRecord) []byte {
	dst = be.AppendUint64(dst, r.ChunkID)
	dst = be.AppendUint64(dst, uint64(r.Timestamp))
	dst = be.AppendUint64(dst, r.Epoch)
	dst = be.AppendUint32(dst, r.FilePos)
	return append(dst, byte(r.Type))
}
