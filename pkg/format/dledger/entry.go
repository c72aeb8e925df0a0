// Package dledger decodes the files of a DLedger (openmessaging/dledger)
// store as RocketMQ's DLedger commitlog uses it: the entry data files
// (48-byte header around one RocketMQ message record), the 32-byte index
// units, and the `checkpoint` and `currterm` Java properties files. It
// turns bytes into structs and back and does no I/O of its own.
//
// Layouts are those of openmessaging/dledger tag dledger-all-0.3.1.2
// (the version apache/rocketmq rocketmq-all-5.3.3 pins):
// dledger/src/main/java/io/openmessaging/storage/dledger/entry/
// DLedgerEntry.java and DLedgerEntryCoder.java, store/file/
// DLedgerMmapFileStore.java and MmapFileList.java; see
// docs/formats/rocketmq-5x.md. All integers are big-endian and signed.
//
// The entry body is not decoded here: in RocketMQ it is a commitlog record
// (pkg/format/rocketmq.DecodeMessage) whose PHYSICALOFFSET is the entry's
// pos + BodyOffset. Keeping DLedger's framing apart from RocketMQ's record
// lets each be checked by the rules of its own recovery.
package dledger

import (
	"encoding/binary"
	"fmt"

	"github.com/storectl/storectl/pkg/format"
)

// Entry layout constants (DLedgerEntry.java, DLedgerMmapFileStore.java,
// MmapFileList.java).
const (
	// HeaderSize is DLedgerEntry.HEADER_SIZE: recovery wants size > it.
	HeaderSize = 44
	// BodyOffset is DLedgerEntry.BODY_OFFSET: where the body starts.
	BodyOffset = 48
	// PosOffset is DLedgerEntry.POS_OFFSET: the pos field.
	PosOffset = 24
	// Magic1 is MAGIC_1 = CURRENT_MAGIC, the only entry magic written.
	Magic1 = 1
	// BlankMagic is MmapFileList.BLANK_MAGIC_CODE: the file end is
	// int -1 | int remaining | zeros to the end of the file.
	BlankMagic = -1
	// MinBlankLen is MmapFileList.MIN_BLANK_LEN: an entry is written into
	// a file only if 8 bytes stay free after it.
	MinBlankLen = 8
	// IndexUnitSize is INDEX_UNIT_SIZE.
	IndexUnitSize = 32
	// DefaultIndexFileSize is DLedgerConfig.mappedFileSizeForEntryIndex:
	// 5 Mi index units.
	DefaultIndexFileSize = IndexUnitSize * 5 * 1024 * 1024
)

// Header is the 48-byte header of a data entry (DLedgerEntryCoder.encode).
type Header struct {
	Magic    int32
	Size     int32 // BodyOffset + BodyLen
	Index    int64 // entry index, +1 per entry
	Term     int64
	Pos      int64 // absolute data offset of this entry
	Channel  int32
	ChainCRC int32 // never computed by DLedger 0.3.1.2: 0
	BodyCRC  int32 // never computed by DLedger 0.3.1.2: 0
	BodyLen  int32
}

// DecodeHeader decodes the 48 bytes at b[0]; off is their data offset.
// Only a short b is an error: the checks are Check's.
func DecodeHeader(b []byte, off int64) (Header, error) {
	if len(b) >= BodyOffset { // the whole header: direct loads
		var h Header
		h.decode(b)
		return h, nil
	}
	return decodeHeaderFields(b, off)
}

// decode sets every field of h from the whole header b[:BodyOffset], one
// store per field: the Reader decodes into its own Header, because a
// Header returned by value reached it through the stack, stored a field
// at a time and copied out with 16-byte loads that had to wait for those
// stores (perf: a third of Reader.Next's samples on that copy).
func (h *Header) decode(b []byte) {
	be := binary.BigEndian
	_ = b[BodyOffset-1]
	h.Magic, h.Size = int32(be.Uint32(b)), int32(be.Uint32(b[4:]))
	h.Index, h.Term, h.Pos = int64(be.Uint64(b[8:])), int64(be.Uint64(b[16:])), int64(be.Uint64(b[24:]))
	h.Channel, h.ChainCRC = int32(be.Uint32(b[32:])), int32(be.Uint32(b[36:]))
	h.BodyCRC, h.BodyLen = int32(be.Uint32(b[40:])), int32(be.Uint32(b[44:]))
}

// decodeHeaderFields is DecodeHeader field by field: a short b's error
// names the field it ends in (FuzzDecodeHeader keeps the two equal).
func decodeHeaderFields(b []byte, off int64) (Header, error) {
	c := format.Cursor{B: b}
	h := Header{
		Magic:    int32(c.U32("magic")),
		Size:     int32(c.U32("size")),
		Index:    int64(c.U64("index")),
		Term:     int64(c.U64("term")),
		Pos:      int64(c.U64("pos")),
		Channel:  int32(c.U32("channel")),
		ChainCRC: int32(c.U32("chainCrc")),
		BodyCRC:  int32(c.U32("bodyCrc")),
		BodyLen:  int32(c.U32("bodyLength")),
	}
	return h, c.Err(off)
}

// Check applies the per-entry checks of DLedgerMmapFileStore.recover's
// scan to a header found at data offset off, in the same order: pos ==
// off, bodyLen + 48 == size, magic in [MAGIC_1, CURRENT_MAGIC], and
// size > HeaderSize. The first failure is a *format.CorruptError naming
// the field. (Index and term order are checked across entries, by the
// caller.)
func (h *Header) Check(off int64) error {
	switch {
	case h.Pos != off:
		return format.Corrupt(off+PosOffset, "pos", fmt.Errorf("%w: pos %d != %d", format.ErrInvalid, h.Pos, off))
	case int64(h.BodyLen)+BodyOffset != int64(h.Size):
		return format.Corrupt(off+4, "size", fmt.Errorf("%w: size %d != %d + %d", format.ErrInvalid, h.Size, h.BodyLen, BodyOffset))
	case h.Magic != Magic1:
		return format.Corrupt(off, "magic", fmt.Errorf("%w: %d", format.ErrMagic, h.Magic))
	case h.Size <= HeaderSize:
		return format.Corrupt(off+4, "size", fmt.Errorf("%w: size %d should > %d", format.ErrInvalid, h.Size, HeaderSize))
	}
	return nil
}

// AppendHeader appends the 48-byte header h.
func AppendHeader(dst []byte, h Header) []byte {
	dst = binary.BigEndian.AppendUint32(dst, uint32(h.Magic))
	dst = binary.BigEndian.AppendUint32(dst, uint32(h.Size))
	dst = binary.BigEndian.AppendUint64(dst, uint64(h.Index))
	dst = binary.BigEndian.AppendUint64(dst, uint64(h.Term))
	dst = binary.BigEndian.AppendUint64(dst, uint64(h.Pos))
	dst = binary.BigEndian.AppendUint32(dst, uint32(h.Channel))
	dst = binary.BigEndian.AppendUint32(dst, uint32(h.ChainCRC))
	dst = binary.BigEndian.AppendUint32(dst, uint32(h.BodyCRC))
	return binary.BigEndian.AppendUint32(dst, uint32(h.BodyLen))
}

// AppendEntry appends a whole entry: h with Size and BodyLen set from body,
// then body.
func AppendEntry(dst []byte, h Header, body []byte) []byte {
	h.BodyLen = int32(len(body))
	h.Size = int32(BodyOffset + len(body))
	return append(AppendHeader(dst, h), body...)
}

// AppendBlank appends the file end MmapFileList.preAppend writes when an
// entry does not fit: remaining bytes, -1 | remaining | zeros.
func AppendBlank(dst []byte, remaining int) []byte {
	dst = binary.BigEndian.AppendUint32(dst, uint32(0xFFFFFFFF))
	dst = binary.BigEndian.AppendUint32(dst, uint32(remaining))
	return append(dst, make([]byte, max(remaining-MinBlankLen, 0))...)
}

// IsBlank reports whether the 4 bytes at b[0] are the BLANK magic.
func IsBlank(b []byte) bool {
	return len(b) >= 4 && int32(binary.BigEndian.Uint32(b)) == BlankMagic
}

// IndexUnit is one 32-byte index unit, at entryIndex * 32 of the index
// files (DLedgerEntryCoder.encodeIndex).
type IndexUnit struct {
	Magic int32
	Pos   int64
	Size  int32
	Index int64
	Term  int64
}

// IsZero reports a never-written unit.
func (u IndexUnit) IsZero() bool { return u == IndexUnit{} }

// DecodeIndexUnit decodes the 32 bytes at b[0]; off is their index offset.
func DecodeIndexUnit(b []byte, off int64) (IndexUnit, error) {
	if len(b) >= IndexUnitSize {
		be := binary.BigEndian
		return IndexUnit{Magic: int32(be.Uint32(b)), Pos: int64(be.Uint64(b[4:])), Size: int32(be.Uint32(b[12:])),
			Index: int64(be.Uint64(b[16:])), Term: int64(be.Uint64(b[24:]))}, nil
	}
	return decodeIndexUnitFields(b, off)
}

// decodeIndexUnitFields is DecodeIndexUnit field by field.
func decodeIndexUnitFields(b []byte, off int64) (IndexUnit, error) {
	c := format.Cursor{B: b}
	u := IndexUnit{
		Magic: int32(c.U32("magic")),
		Pos:   int64(c.U64("pos")),
		Size:  int32(c.U32("size")),
		Index: int64(c.U64("index")),
		Term:  int64(c.U64("term")),
	}
	return u, c.Err(off)
}

// AppendIndexUnit appends the 32-byte encoding of u.
func AppendIndexUnit(dst []byte, u IndexUnit) []byte {
	dst = binary.BigEndian.AppendUint32(dst, uint32(u.Magic))
	dst = binary.BigEndian.AppendUint64(dst, uint64(u.Pos))
	dst = binary.BigEndian.AppendUint32(dst, uint32(u.Size))
	dst = binary.BigEndian.AppendUint64(dst, uint64(u.Index))
	return binary.BigEndian.AppendUint64(dst, uint64(u.Term))
}

// IndexOf is the index unit a header should have.
func (h *Header) IndexOf() IndexUnit {
	return IndexUnit{Magic: h.Magic, Pos: h.Pos, Size: h.Size, Index: h.Index, Term: h.Term}
}

// Mismatch names the first field where an index unit disagrees with the
// entry it should describe, in recover()'s order (magic, size, index,
// term, pos), or "" when they agree.
func (u IndexUnit) Mismatch(h *Header) string {
	switch {
	case u.Magic != h.Magic:
		return "magic"
	case u.Size != h.Size:
		return "size"
	case u.Index != h.Index:
		return "index"
	case u.Term != h.Term:
		return "term"
	case u.Pos != h.Pos:
		return "pos"
	}
	return ""
}
