package rabbitmq

// Legacy (v1) queue index segment <S>.idx (§5.3; rabbit_queue_index.erl,
// parse_segment_entries/3, add_segment_relseq_entry/3). No header, no
// magic, no checksum; S = SeqId div SegmentEntryCount (from .config).
//
//	publish : <<1:1, IsPersistent:1, RelSeq:14, MsgId:16/binary, Expiry:64,
//	            Size:32, EmbSize:32, Emb:EmbSize/binary>>     34 + EmbSize bytes
//	del/ack : <<2#01:2, RelSeq:14>>                             2 bytes
//
// The first del/ack record of a RelSeq marks it delivered, the second acked.

import (
	"encoding/binary"
	"errors"

	"github.com/storectl/storectl/pkg/format"
)

// Sizes of v1 index records.
const (
	// IDXPublishSize is the fixed part of a segment publish record.
	IDXPublishSize = 2 + idxPubBody + 4
	// IDXRelSeqSize is the size of a del/ack record.
	IDXRelSeqSize = 2
	// MaxEmbeddedSize bounds EmbSize in .idx and journal.jif: embedding
	// is for messages below queue_index_embed_msgs_below (4096 by default)
	// and no message exceeds the broker's 512 MiB max_message_size.
	MaxEmbeddedSize = 512 << 20

	idxPubBody = 16 + 8 + 4 // MsgId, Expiry, Size (PUB_RECORD_BODY_BYTES)
)

// IDXRecordKind tells a publish from a del/ack record.
type IDXRecordKind uint8

// Kinds of .idx records.
const (
	IDXPublish IDXRecordKind = iota + 1
	IDXDelAck
)

// IDXRecord is one record of a .idx segment.
type IDXRecord struct {
	Offset     int64
	Kind       IDXRecordKind
	RelSeq     uint16
	Persistent bool     // publish only
	MsgID      [16]byte // publish only
	Expiry     uint64   // publish only; 0 = none
	Size       uint32   // publish only; payload size (stats)
	Embedded   []byte   // publish only; ETF of the message or empty
	Len        int      // bytes taken by the record
}

// ErrIDXBadPrefix marks a record starting with 2#00, which no v1 writer
// produces (the broker's parser has no clause for it and crashes).
var ErrIDXBadPrefix = errors.New("unknown segment record prefix")

// DecodeIDXRecord decodes the record at b[0]; off is its file offset.
func DecodeIDXRecord(b []byte, off int64) (IDXRecord, error) {
	r := IDXRecord{Offset: off}
	c := format.Cursor{B: b}
	p := c.U16("prefix")
	if c.Failed() {
		return r, c.Err(off)
	}
	r.RelSeq = p & 0x3fff
	switch {
	case p&0x8000 != 0:
		r.Kind = IDXPublish
		r.Persistent = p&0x4000 != 0
		copy(r.MsgID[:], c.Take("msgId", 16))
		r.Expiry = c.U64("expiry")
		r.Size = c.U32("size")
		emb := c.U32("embSize")
		if !c.Failed() && emb > MaxEmbeddedSize {
			c.FailAt(c.Off-4, "embSize", format.ErrTooLarge)
			return r, c.Err(off)
		}
		r.Embedded = c.Take("embedded", int(emb))
	case p&0xc000 == 0x4000:
		r.Kind = IDXDelAck
	default:
		c.FailAt(0, "prefix", ErrIDXBadPrefix)
	}
	r.Len = c.Off
	return r, c.Err(off)
}

// AppendIDXRecord appends r as rabbit_queue_index writes it: a publish
// (Kind IDXPublish: prefix, msg id, expiry, size, embedded message) or a
// del/ack (Kind IDXDelAck). RelSeq keeps its low 14 bits. Offset and Len
// are ignored.
func AppendIDXRecord(b []byte, r IDXRecord) []byte {
	rel := r.RelSeq & 0x3fff
	if r.Kind == IDXDelAck {
		return binary.BigEndian.AppendUint16(b, 0x4000|rel)
	}
	p := 0x8000 | rel
	if r.Persistent {
		p |= 0x4000
	}
	b = binary.BigEndian.AppendUint16(b, p)
	b = append(b, r.MsgID[:]...)
	b = binary.BigEndian.AppendUint64(b, r.Expiry)
	b = binary.BigEndian.AppendUint32(b, r.Size)
	b = binary.BigEndian.AppendUint32(b, uint32(len(r.Embedded)))
	return append(b, r.Embedded...)
}

// ReadIDX decodes a whole segment into records in file order. It stops at
// the first record that does not decode and returns it as a
// *format.CorruptError next to the records before it. An all-zero file
// (which the broker deletes with a warning) yields no records and no error;
// see IDXAllZero.
func ReadIDX(b []byte) ([]IDXRecord, error) {
	if IDXAllZero(b) {
		return nil, nil
	}
	var recs []IDXRecord
	for off := 0; off < len(b); {
		r, err := DecodeIDXRecord(b[off:], int64(off))
		if err != nil {
			return recs, err
		}
		recs = append(recs, r)
		off += r.Len
	}
	return recs, nil
}

// IDXAllZero reports a non-empty segment that holds only zero bytes; the
// broker deletes it at load ("file only contains NUL bytes").
func IDXAllZero(b []byte) bool { return len(b) > 0 && qiAllZero(b) }
