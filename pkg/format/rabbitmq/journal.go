package rabbitmq

// Legacy (v1) queue index journal journal.jif (§5.3; rabbit_queue_index.erl,
// parse_journal_entries/2). Append-only, no header, no checksum:
//
//	publish : <<Prefix:2, SeqId:62, MsgId:16/binary, Expiry:64, Size:32,
//	            EmbSize:32, Emb:EmbSize/binary>>   Prefix 00 persistent, 01 transient
//	deliver : <<2#10:2, SeqId:62>>
//	ack     : <<2#11:2, SeqId:62>>
//
// A publish whose first 8+32 bytes are all zero ends parsing (padding left
// by a dirty shutdown); any other unparsable tail is ignored by the broker.

import (
	"encoding/binary"
	"errors"

	"github.com/storectl/storectl/pkg/format"
)

// JournalKind is the type of a journal record.
type JournalKind uint8

// Journal record kinds.
const (
	JournalPublish JournalKind = iota + 1
	JournalDeliver
	JournalAck
)

// JournalPublishSize is the fixed part of a journal publish record
// (prefix and SeqId 8, MsgId, Expiry and Size 28, EmbSize 4); the
// embedded message follows it.
const JournalPublishSize = 8 + idxPubBody + 4

// JournalRecord is one record of journal.jif.
type JournalRecord struct {
	Offset     int64
	Kind       JournalKind
	SeqID      uint64
	Persistent bool     // publish only (prefix 00)
	MsgID      [16]byte // publish only
	Expiry     uint64   // publish only
	Size       uint32   // publish only
	Embedded   []byte   // publish only
	Len        int
}

// ErrJournalZero marks the all-zero publish header that ends parsing.
var ErrJournalZero = errors.New("all-zero entry ends the journal")

// DecodeJournalRecord decodes the record at b[0]; off is its file offset.
// An all-zero publish header returns ErrJournalZero.
func DecodeJournalRecord(b []byte, off int64) (JournalRecord, error) {
	r := JournalRecord{Offset: off}
	c := format.Cursor{B: b}
	w := c.U64("seqId")
	if c.Failed() {
		return r, c.Err(off)
	}
	r.SeqID = w & (1<<62 - 1)
	switch w >> 62 {
	case 2:
		r.Kind = JournalDeliver
	case 3:
		r.Kind = JournalAck
	default:
		if len(b) >= JournalPublishSize && qiAllZero(b[:JournalPublishSize]) {
			c.FailAt(0, "entry", ErrJournalZero)
			return r, c.Err(off)
		}
		r.Kind = JournalPublish
		r.Persistent = w>>62 == 0
		copy(r.MsgID[:], c.Take("msgId", 16))
		r.Expiry = c.U64("expiry")
		r.Size = c.U32("size")
		emb := c.U32("embSize")
		if !c.Failed() && emb > MaxEmbeddedSize {
			c.FailAt(c.Off-4, "embSize", format.ErrTooLarge)
			return r, c.Err(off)
		}
		r.Embedded = c.Take("embedded", int(emb))
	}
	r.Len = c.Off
	return r, c.Err(off)
}

// AppendJournalRecord appends r as rabbit_queue_index writes it: a
// publish (prefix 00 persistent, 01 transient, then the msg id, expiry,
// size and embedded message), a deliver or an ack. SeqID keeps its low
// 62 bits. Offset and Len are ignored.
func AppendJournalRecord(b []byte, r JournalRecord) []byte {
	seq := r.SeqID & (1<<62 - 1)
	switch r.Kind {
	case JournalDeliver:
		return binary.BigEndian.AppendUint64(b, 2<<62|seq)
	case JournalAck:
		return binary.BigEndian.AppendUint64(b, 3<<62|seq)
	}
	if !r.Persistent {
		seq |= 1 << 62
	}
	b = binary.BigEndian.AppendUint64(b, seq)
	b = append(b, r.MsgID[:]...)
	b = binary.BigEndian.AppendUint64(b, r.Expiry)
	b = binary.BigEndian.AppendUint32(b, r.Size)
	b = binary.BigEndian.AppendUint32(b, uint32(len(r.Embedded)))
	return append(b, r.Embedded...)
}

// JournalFile is a decoded journal.jif.
type JournalFile struct {
	Records []JournalRecord
	// End is the offset where parsing stopped: len(b) at a clean end, the
	// all-zero entry, or the unparsable tail.
	End int64
	// ZeroEnd is true when parsing stopped at an all-zero publish.
	ZeroEnd bool
}

// ReadJournal decodes journal.jif the way the broker does: records up to
// the end, an all-zero publish header (ZeroEnd, no error) or an
// unparsable tail, which the broker ignores and ReadJournal returns as a
// *format.CorruptError next to the records before it.
func ReadJournal(b []byte) (JournalFile, error) {
	var j JournalFile
	off := 0
	for off < len(b) {
		r, err := DecodeJournalRecord(b[off:], int64(off))
		if errors.Is(err, ErrJournalZero) {
			j.ZeroEnd = true
			break
		}
		if err != nil {
			j.End = int64(off)
			return j, err
		}
		j.Records = append(j.Records, r)
		off += r.Len
	}
	j.End = int64(off)
	return j, nil
}
