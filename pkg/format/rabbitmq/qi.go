package rabbitmq

// Classic queue index v2 segment file <S>.qi (§5.1;
// rabbit_classic_queue_index_v2.erl, new_segment_file/3, build_entry/1,
// recover_segment/10, queue_index_walker_segment/1):
//
//	header  0  4  magic "RCQI"      entry i at 64+32*i:
//	        4  1  version 2           0  1  status (1 present, 0 none/acked)
//	        5  8  FromSeqId           1  1  flags (bit0 persistent, bits 1-7 zero)
//	       13  8  ToSeqId (excl.)     2  1  unused 0
//	       21 43  zero                3 17  location: 0 | 1,MsgId(16) |
//	                                           2,StoreOffset:64,StoreSize:32,0:32
//	                                 20  4  size     24  8  expiry (µs, 0 none)

import (
	"encoding/binary"
	"errors"

	"github.com/storectl/storectl/pkg/format"
)

// Sizes and magic of .qi files.
const (
	QIMagic      uint32 = 0x52435149 // "RCQI"
	QIVersion    uint8  = 2
	QIHeaderSize        = 64
	QIEntrySize         = 32
	// QIDefaultSegmentEntryCount is the v2 segment size
	// (classic_queue_index_v2_segment_entry_count default).
	QIDefaultSegmentEntryCount = 4096
	// QIMaxSegmentEntryCount bounds ToSeqId-FromSeqId taken from a header;
	// the broker setting is a small integer, and a larger span would let a
	// flipped header bit make ReadQI walk a huge range.
	QIMaxSegmentEntryCount = 1 << 20
)

// Location types of a .qi entry.
const (
	QILocMemory      uint8 = 0 // no copy on disk (transient / in memory)
	QILocSharedStore uint8 = 1 // msg_store_persistent, by MsgId
	QILocQueueStore  uint8 = 2 // the queue's own <S>.qs
)

// QIHeader is the 64-byte header of a .qi file. A .qs file's header has
// the same layout (QSHeader).
type QIHeader struct {
	Magic     uint32
	Version   uint8
	FromSeqID uint64
	ToSeqID   uint64
	// ReservedZero is false when any of the 43 reserved bytes is set.
	// The broker does not look at them; a verifier may.
	ReservedZero bool
}

// DecodeQIHeader decodes the header at b[0]. Like the broker it rejects
// only a short header, a wrong magic or a wrong version.
func DecodeQIHeader(b []byte) (QIHeader, error) { return decodeV2Header(b, QIMagic, QIVersion) }

// decodeV2Header decodes the 64-byte header shared by .qi and .qs files
// (magic, version, FromSeqId, ToSeqId, 43 zero bytes), rejecting a short
// header, a magic other than magic and a version other than version.
func decodeV2Header(b []byte, magic uint32, version uint8) (QIHeader, error) {
	c := format.Cursor{B: b}
	var h QIHeader
	h.Magic = c.U32("magic")
	if c.Failed() {
		return h, c.Err(0)
	}
	if h.Magic != magic {
		c.FailAt(0, "magic", format.ErrMagic)
		return h, c.Err(0)
	}
	h.Version = c.U8("version")
	if !c.Failed() && h.Version != version {
		c.FailAt(4, "version", format.ErrUnsupported)
	}
	h.FromSeqID = c.U64("fromSeqId")
	h.ToSeqID = c.U64("toSeqId")
	h.ReservedZero = qiAllZero(c.Take("reserved", QIHeaderSize-21))
	return h, c.Err(0)
}

// QIEntry is one 32-byte slot of a .qi file.
type QIEntry struct {
	Offset      int64 // file offset of the status byte
	Status      uint8
	Flags       uint8
	Persistent  bool
	Unused      uint8
	LocType     uint8
	MsgID       [16]byte // LocType 1
	StoreOffset uint64   // LocType 2: offset of the entry header in <S>.qs
	StoreSize   uint32   // LocType 2: blob size, excluding the 8-byte header
	Size        uint32   // message payload size (stats)
	Expiry      uint64   // absolute Unix µs; 0 = none
	Raw         []byte   // the 32 bytes, aliasing the input
}

// Acked reports a slot that is all zero: never written, or acked.
func (e *QIEntry) Acked() bool { return qiAllZero(e.Raw) }

// Dropped reports a slot whose status byte alone was zeroed, as recovery
// does when it drops an entry; the other 31 bytes keep their old values.
func (e *QIEntry) Dropped() bool { return e.Status == 0 && !e.Acked() }

// WalkerRef reports whether the shared-store ref-count walker of a dirty
// recovery counts this slot: the broker's pattern
// <<1, _:7, 1:1, _, 1, Id:16/binary, _/bits>> (status 1, persistent,
// location 1), which ignores flag bits 1-7 and the unused byte.
func (e *QIEntry) WalkerRef() bool {
	return len(e.Raw) == QIEntrySize && e.Raw[0] == 1 && e.Raw[1]&1 == 1 && e.Raw[3] == QILocSharedStore
}

// DecodeQIEntry decodes the slot at b[0]; off is its file offset. Status-0
// slots are returned without further checks (their bytes are stale). A
// status-1 slot that recovery could not match (bad flag bits, non-zero
// unused byte, unknown location or non-zero padding) returns the decoded
// entry and an ErrInvalid *format.CorruptError naming the field.
func DecodeQIEntry(b []byte, off int64) (QIEntry, error) {
	e := QIEntry{Offset: off}
	c := format.Cursor{B: b}
	e.Raw = c.Take("entry", QIEntrySize)
	if c.Failed() {
		return e, c.Err(off)
	}
	c = format.Cursor{B: e.Raw}
	e.Status = c.U8("status")
	e.Flags = c.U8("flags")
	e.Persistent = e.Flags&1 == 1
	e.Unused = c.U8("unused")
	e.LocType = c.U8("location")
	loc := c.Take("location", 16)
	e.Size = c.U32("size")
	e.Expiry = c.U64("expiry")
	switch e.LocType {
	case QILocSharedStore:
		copy(e.MsgID[:], loc)
	case QILocQueueStore:
		e.StoreOffset = binary.BigEndian.Uint64(loc[0:8])
		e.StoreSize = binary.BigEndian.Uint32(loc[8:12])
	}
	switch {
	case e.Status == 0:
		return e, nil
	case e.Status != 1:
		c.FailAt(0, "status", format.ErrInvalid)
	case e.Flags&^1 != 0:
		c.FailAt(1, "flags", format.ErrInvalid)
	case e.Unused != 0:
		c.FailAt(2, "unused", format.ErrInvalid)
	case e.LocType > QILocQueueStore:
		c.FailAt(3, "location", format.ErrInvalid)
	case e.LocType == QILocMemory && !qiAllZero(loc):
		c.FailAt(4, "location", format.ErrInvalid)
	case e.LocType == QILocQueueStore && !qiAllZero(loc[12:16]):
		c.FailAt(16, "location", format.ErrInvalid)
	case e.LocType == QILocQueueStore && e.StoreOffset < QSHeaderSize:
		c.FailAt(4, "storeOffset", format.ErrInvalid)
	}
	return e, c.Err(off)
}

// QIRecord is a present (status 1, well-formed) slot with its sequence id.
type QIRecord struct {
	SeqID uint64
	Slot  int
	QIEntry
}

// QIFile is a decoded .qi file.
type QIFile struct {
	Header  QIHeader
	Records []QIRecord // present entries, in slot order
	// WalkerRefs are the slots the dirty-recovery ref-count walker counts
	// (see QIEntry.WalkerRef), malformed ones included.
	WalkerRefs []QIRecord
	Acked      int // all-zero slots before the end of the file
	Dropped    int // status-0 slots with stale bytes
	// Anomalies are per-slot problems: malformed present entries, a torn
	// last entry, slots past the segment size, a bad header span. Each is a
	// *format.CorruptError with the absolute offset.
	Anomalies []error
}

// Anomalies of ReadQI that are not field failures of one entry.
var (
	// ErrQITornEntry marks a file whose length is not 64+32*n: the last
	// entry was cut by a crash or power loss.
	ErrQITornEntry = errors.New("torn last entry")
	// ErrQIPastSegment marks slots beyond ToSeqId-FromSeqId, which the
	// broker never reads.
	ErrQIPastSegment = errors.New("entry past the end of the segment")
)

// ReadQI decodes a whole .qi file. A header failure is returned as the
// error (the broker deletes such a file with its .qs); entry-level
// problems go to QIFile.Anomalies and decoding goes on.
func ReadQI(b []byte) (QIFile, error) {
	var f QIFile
	err := ReadQIInto(&f, b)
	return f, err
}

// ReadQIInto is ReadQI decoding into f, reusing its slices' storage (a
// queue dir reader decodes segment after segment into one QIFile).
func ReadQIInto(f *QIFile, b []byte) error {
	*f = QIFile{Records: f.Records[:0], WalkerRefs: f.WalkerRefs[:0], Anomalies: f.Anomalies[:0]}
	h, err := DecodeQIHeader(b)
	f.Header = h
	if err != nil {
		return err
	}
	span := uint64(QIDefaultSegmentEntryCount)
	if h.ToSeqID > h.FromSeqID && h.ToSeqID-h.FromSeqID <= QIMaxSegmentEntryCount {
		span = h.ToSeqID - h.FromSeqID
	} else {
		f.Anomalies = append(f.Anomalies, format.Corrupt(13, "toSeqId", format.ErrInvalid))
	}
	n := (len(b) - QIHeaderSize) / QIEntrySize
	// Sized once: n is bounded by the file, which the caller read whole.
	if cap(f.Records) < min(n, int(span)) {
		f.Records = make([]QIRecord, 0, min(n, int(span)))
	}
	if cap(f.WalkerRefs) < n {
		f.WalkerRefs = make([]QIRecord, 0, n)
	}
	for i := 0; i < n; i++ {
		off := QIHeaderSize + i*QIEntrySize
		e, err := DecodeQIEntry(b[off:], int64(off))
		rec := QIRecord{SeqID: h.FromSeqID + uint64(i), Slot: i, QIEntry: e}
		if e.WalkerRef() {
			f.WalkerRefs = append(f.WalkerRefs, rec)
		}
		if uint64(i) >= span {
			if !e.Acked() {
				f.Anomalies = append(f.Anomalies, format.Corrupt(int64(off), "entry", ErrQIPastSegment))
			}
			continue
		}
		switch {
		case err != nil:
			f.Anomalies = append(f.Anomalies, err)
		case e.Acked():
			f.Acked++
		case e.Dropped():
			f.Dropped++
		default:
			f.Records = append(f.Records, rec)
		}
	}
	if r := (len(b) - QIHeaderSize) % QIEntrySize; r != 0 {
		off := QIHeaderSize + n*QIEntrySize
		f.Anomalies = append(f.Anomalies, format.Corrupt(int64(off), "entry", ErrQITornEntry))
	}
	return nil
}

// qiAllZero reports whether every byte of b is zero (true when b is
// empty): the package's zero check (acked .qi slots, reserved header
// bytes, zeroed journal entries, .qs padding).
func qiAllZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}
