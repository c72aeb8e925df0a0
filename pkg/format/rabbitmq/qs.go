package rabbitmq

// Per-queue message store v2 file <S>.qs (§5.2;
// rabbit_classic_queue_store_v2.erl, get_read_fd/2, check_msg_on_disk/3):
//
//	header  0 4 magic "RCQS"  4 1 version 2  5 8 FromSeqId  13 8 ToSeqId  21 43 zero
//	entry   0 4 Size   4 1 Flags (bit0 = CRC present)   5 2 CRC16   7 1 zero
//	        8 Size Blob: ETF of the message, zero padded up to Size
//
// CRC16 is the low 16 bits of CRC-32/IEEE (erlang:crc32) over the Size blob
// bytes. Entries are found through the StoreOffset/StoreSize of type-2
// .qi slots, never by walking the file: unwritten gaps are normal.

import (
	"errors"
	"hash/crc32"

	"github.com/storectl/storectl/pkg/format"
	"github.com/storectl/storectl/pkg/format/etf"
)

// Sizes and magic of .qs files.
const (
	QSMagic           uint32 = 0x52435153 // "RCQS"
	QSVersion         uint8  = 2
	QSHeaderSize             = 64
	QSEntryHeaderSize        = 8
	// QSMaxEntrySize bounds an entry's Size: RabbitMQ's hard maximum
	// message size is 512 MiB (max_message_size), so no blob is larger.
	QSMaxEntrySize = 512 << 20
)

// QSHeader is the 64-byte header of a .qs file: the .qi header layout
// with magic "RCQS".
type QSHeader = QIHeader

// DecodeQSHeader decodes the header at b[0], rejecting what the broker's
// reader rejects (short header, wrong magic or version).
func DecodeQSHeader(b []byte) (QSHeader, error) { return decodeV2Header(b, QSMagic, QSVersion) }

// QSEntry is one message entry of a .qs file.
type QSEntry struct {
	Offset int64 // file offset of the Size field
	Size   uint32
	Flags  uint8
	UseCRC bool   // flags bit 0
	CRC16  uint16 // stored CRC
	Blob   []byte // Size bytes, aliasing the input
}

// CRCOK reports whether the stored CRC matches the blob, or true when the
// entry carries no CRC (flags bit 0 clear).
func (e *QSEntry) CRCOK() bool {
	return !e.UseCRC || uint16(crc32.ChecksumIEEE(e.Blob)) == e.CRC16
}

// Causes of a failed .qs lookup, matching the broker's recovery reasons.
var (
	// ErrQSNoEntry is the broker's eof: StoreOffset is at or past the end
	// of the file.
	ErrQSNoEntry = errors.New("store offset at or past end of file")
	// ErrQSBadSize is the broker's bad_size: the entry's Size field differs
	// from the .qi StoreSize, or the entry runs past the end of the file.
	ErrQSBadSize = errors.New("entry size does not match the index")
)

// DecodeQSEntry decodes the entry at b[0]; off is its file offset. It
// checks the length against b and QSMaxEntrySize and the CRC (a mismatch
// returns the entry and an ErrChecksum *format.CorruptError at off+5).
func DecodeQSEntry(b []byte, off int64) (QSEntry, error) {
	c := format.Cursor{B: b}
	e := QSEntry{Offset: off}
	e.Size = c.U32("size")
	e.Flags = c.U8("flags")
	e.UseCRC = e.Flags&1 == 1
	e.CRC16 = c.U16("crc16")
	c.U8("unused")
	if !c.Failed() && e.Size > QSMaxEntrySize {
		c.FailAt(0, "size", format.ErrTooLarge)
		return e, c.Err(off)
	}
	e.Blob = c.Take("blob", int(e.Size))
	if !c.Failed() && !e.CRCOK() {
		c.FailAt(5, "crc16", format.ErrChecksum)
	}
	return e, c.Err(off)
}

// ReadQSEntry looks up the entry a type-2 .qi slot points at in the whole
// .qs file b, the way recovery's check_msg_on_disk/3 does: bad header
// (ErrMagic/ErrUnsupported/ErrShort at the header), eof (ErrQSNoEntry),
// bad_size (ErrQSBadSize) or bad_crc (ErrChecksum). The entry is returned
// whenever its bytes could be sliced.
func ReadQSEntry(b []byte, storeOffset uint64, storeSize uint32) (QSEntry, error) {
	if _, err := DecodeQSHeader(b); err != nil {
		return QSEntry{}, err
	}
	if storeOffset >= uint64(len(b)) {
		return QSEntry{Offset: int64(min(storeOffset, 1<<62))},
			format.Corrupt(int64(min(storeOffset, 1<<62)), "storeOffset", ErrQSNoEntry)
	}
	off := int64(storeOffset)
	rest := b[off:]
	c := format.Cursor{B: rest}
	size := c.U32("size")
	if c.Failed() || size != storeSize ||
		uint64(size)+QSEntryHeaderSize > uint64(len(rest)) {
		return QSEntry{Offset: off, Size: size}, format.Corrupt(off, "size", ErrQSBadSize)
	}
	return DecodeQSEntry(rest[:QSEntryHeaderSize+int(size)], off)
}

// QSDropReason names the broker's recovery reason for a ReadQSEntry or
// missing-file error: "no_file", "bad_header", "eof", "bad_size" or
// "bad_crc"; "" for nil.
func QSDropReason(err error) string {
	switch {
	case err == nil:
		return ""
	case errors.Is(err, ErrQSNoFile):
		return "no_file"
	case errors.Is(err, ErrQSNoEntry):
		return "eof"
	case errors.Is(err, ErrQSBadSize):
		return "bad_size"
	case errors.Is(err, format.ErrChecksum):
		return "bad_crc"
	default:
		return "bad_header"
	}
}

// ErrQSNoFile marks a type-2 slot whose segment has no .qs file.
var ErrQSNoFile = errors.New("no .qs file for this segment")

// TrimQSPadding cuts the zero padding after the term in a .qs entry's
// blob: Size is erlang:external_size of the message, an upper bound, and
// the writer zero-fills the rest (§5.2). It returns the blob up to the end
// of its first term when only zero bytes follow, else b unchanged (no
// complete term, or non-zero bytes after it).
func TrimQSPadding(b []byte) []byte {
	n, err := etf.SkipTerm(b)
	if err != nil || n <= 0 || n > len(b) || !qiAllZero(b[n:]) {
		return b
	}
	return b[:n]
}
