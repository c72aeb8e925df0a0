// Package timer decodes the files of the RocketMQ 5.x timer store
// ("timer wheel" delayed messages): the timerlog's 52-byte units and its
// BLANK file ends, the timerwheel's 32-byte slots, the config/timercheck
// checkpoint and the config/timermetrics JSON. It turns bytes into structs
// and back and does no I/O of its own: readers take an io.ReaderAt.
//
// The layouts are those of apache/rocketmq rocketmq-all-5.3.3,
// store/src/main/java/org/apache/rocketmq/store/timer/ (TimerLog.java,
// TimerWheel.java, Slot.java, TimerCheckpoint.java, TimerMetrics.java and
// TimerMessageStore.doEnqueue, which writes a unit); see
// docs/formats/rocketmq-5x.md. All integers are big-endian and, as in
// Java, signed.
//
// It is a package of its own, not part of pkg/format/rocketmq, because it
// is a separate store with its own files, offsets and recovery: a timer
// unit points into the commitlog, but nothing in the commitlog format
// knows about units, slots or the checkpoint.
package timer

import (
	"encoding/binary"
	"fmt"

	"github.com/storectl/storectl/pkg/format"
)

// Sizes and magic values of the timerlog (TimerLog.java).
const (
	// UnitSize is TimerLog.UNIT_SIZE: size, prevPos, magic, currWriteTime,
	// delayedTime, offsetPy, sizePy, hashTopic and 8 reserved bytes.
	UnitSize = 52
	// BlankSize is TimerLog.MIN_BLANK_LEN: a file end is
	// int remaining | long 0 | int BlankMagic.
	BlankSize = 16
	// BlankMagic is TimerLog.BLANK_MAGIC_CODE (0xBBCCDDEE ^ 1880681586 + 8),
	// the same value as the commitlog BLANK; it sits at byte 12 like a
	// unit's magic.
	BlankMagic     = int32(-0x342bce6c) // 0xCBD43194
	blankMagicBits = uint32(0xCBD43194)
	// DefaultLogFileSize is mappedFileSizeTimerLog's default (100 MiB).
	DefaultLogFileSize = 100 << 20
)

// Unit magic flags (TimerMessageStore.MAGIC_*). A unit's magic is valid
// when no bit above the low four is set (TimerMessageStore.isMagicOK).
const (
	MagicDefault = 1      // an ordinary timer message
	MagicRoll    = 1 << 1 // re-enqueued: the delay was longer than the roll window
	MagicDelete  = 1 << 2 // a cancel marker for another message (TIMER_DEL_UNIQKEY)
)

// Byte offsets inside a unit of the fields recovery reads.
const (
	unitMagicOff    = 12
	unitOffsetPyOff = 28 // TimerLog.UNIT_PRE_SIZE_FOR_MSG
)

// Unit is one timerlog unit (TimerMessageStore.doEnqueue writes it).
type Unit struct {
	Offset          int64 // timerlog offset of the unit, as passed to DecodeUnit
	Size            int32 // always UnitSize in a valid unit
	PrevPos         int64 // timerlog offset of the previous unit of the same wheel slot; -1 for the first
	Magic           int32 // Magic* flags
	CurrWriteTimeMs int64 // enqueue time, rounded down to the precision
	DelayedMs       int32 // deliver time minus CurrWriteTimeMs
	OffsetPy        int64 // commitlog offset of the rmq_sys_wheel_timer record
	SizePy          int32 // that record's TOTALSIZE
	HashTopic       int32 // Java String.hashCode of the REAL_TOPIC (hashTopicForMetrics)
	Reserved        int64
}

// MagicOK is TimerMessageStore.isMagicOK.
func MagicOK(magic int32) bool { return magic|0xF == 0xF }

// Valid reports whether recovery accepts the unit: size 52 and a magic
// without high bits (TimerMessageStore.recoverAndRevise with check on).
func (u *Unit) Valid() bool { return u.Size == UnitSize && MagicOK(u.Magic) }

// DeliverMs is the time the unit is due: CurrWriteTimeMs + DelayedMs.
func (u *Unit) DeliverMs() int64 { return u.CurrWriteTimeMs + int64(u.DelayedMs) }

// Roll reports the MagicRoll flag.
func (u *Unit) Roll() bool { return u.Magic&MagicRoll != 0 }

// Delete reports the MagicDelete flag.
func (u *Unit) Delete() bool { return u.Magic&MagicDelete != 0 }

// MagicFlags names the set flags, e.g. "DEFAULT ROLL".
func MagicFlags(magic int32) string {
	s := ""
	for _, f := range []struct {
		bit  int32
		name string
	}{{MagicDefault, "DEFAULT"}, {MagicRoll, "ROLL"}, {MagicDelete, "DELETE"}} {
		if magic&f.bit != 0 {
			if s != "" {
				s += " "
			}
			s += f.name
		}
	}
	return s
}

// DecodeUnit decodes the 52 bytes at b[0] as a unit, whatever their
// values; off is the timerlog offset of b[0]. Only a short b is an error
// (a *format.CorruptError); Valid says whether recovery would accept it.
func DecodeUnit(b []byte, off int64) (Unit, error) {
	if len(b) >= UnitSize { // the whole unit: direct loads (the walk's per-unit cost)
		var u Unit
		DecodeUnitTo(&u, (*[UnitSize]byte)(b[:UnitSize]), off)
		return u, nil
	}
	return decodeUnitFields(b, off)
}

// DecodeUnitTo is DecodeUnit of a whole unit into *u, field by field: the
// per-unit walks decode into the Unit they keep, where a copy of
// DecodeUnit's result (written in 4- and 8-byte stores, copied in 16-byte
// loads that the stores cannot forward to) stalled on every unit.
func DecodeUnitTo(u *Unit, b *[UnitSize]byte, off int64) {
	be := binary.BigEndian
	u.Offset = off
	u.Size = int32(be.Uint32(b[0:]))
	u.PrevPos = int64(be.Uint64(b[4:]))
	u.Magic = int32(be.Uint32(b[12:]))
	u.CurrWriteTimeMs = int64(be.Uint64(b[16:]))
	u.DelayedMs = int32(be.Uint32(b[24:]))
	u.OffsetPy = int64(be.Uint64(b[28:]))
	u.SizePy = int32(be.Uint32(b[36:]))
	u.HashTopic = int32(be.Uint32(b[40:]))
	u.Reserved = int64(be.Uint64(b[44:]))
}

// decodeUnitFields is DecodeUnit field by field: a short b's error names
// the field it ends in (FuzzDecodeUnit keeps the two equal).
func decodeUnitFields(b []byte, off int64) (Unit, error) {
	c := format.Cursor{B: b}
	u := Unit{Offset: off}
	u.Size = int32(c.U32("size"))
	u.PrevPos = int64(c.U64("prevPos"))
	u.Magic = int32(c.U32("magic"))
	u.CurrWriteTimeMs = int64(c.U64("currWriteTime"))
	u.DelayedMs = int32(c.U32("delayedTime"))
	u.OffsetPy = int64(c.U64("offsetPy"))
	u.SizePy = int32(c.U32("sizePy"))
	u.HashTopic = int32(c.U32("hashTopic"))
	u.Reserved = int64(c.U64("reserved"))
	return u, c.Err(off)
}

// AppendUnit appends the 52-byte encoding of u (its Offset is not stored).
func AppendUnit(dst []byte, u Unit) []byte {
	dst = binary.BigEndian.AppendUint32(dst, uint32(u.Size))
	dst = binary.BigEndian.AppendUint64(dst, uint64(u.PrevPos))
	dst = binary.BigEndian.AppendUint32(dst, uint32(u.Magic))
	dst = binary.BigEndian.AppendUint64(dst, uint64(u.CurrWriteTimeMs))
	dst = binary.BigEndian.AppendUint32(dst, uint32(u.DelayedMs))
	dst = binary.BigEndian.AppendUint64(dst, uint64(u.OffsetPy))
	dst = binary.BigEndian.AppendUint32(dst, uint32(u.SizePy))
	dst = binary.BigEndian.AppendUint32(dst, uint32(u.HashTopic))
	return binary.BigEndian.AppendUint64(dst, uint64(u.Reserved))
}

// AppendBlank appends the 16-byte BLANK that ends a timerlog file with
// remaining bytes left (TimerLog.append).
func AppendBlank(dst []byte, remaining int32) []byte {
	dst = binary.BigEndian.AppendUint32(dst, uint32(remaining))
	dst = binary.BigEndian.AppendUint64(dst, 0)
	return binary.BigEndian.AppendUint32(dst, blankMagicBits)
}

// OffsetForLastUnit is TimerLog.getOffsetForLastUnit: the file offset of
// the last unit that can be written into a file of fileSize bytes.
func OffsetForLastUnit(fileSize int64) int64 {
	return fileSize - (fileSize-BlankSize)%UnitSize - BlankSize - UnitSize
}

// Entry kinds at a 52-byte step of a timerlog file.
const (
	EntryUnit  = "unit"  // a unit recovery accepts
	EntryBlank = "blank" // the file's BLANK end
	EntryZero  = "zero"  // all-zero bytes: the end of written data
	EntryBad   = "bad"   // a unit recovery rejects (size or magic): its scan stops here
)

// Entry is what sits at one position of a timerlog file.
type Entry struct {
	Kind string
	Unit Unit  // EntryUnit and EntryBad
	Rest int32 // EntryBlank: the remaining-bytes field
}

// DecodeEntry classifies the bytes at b[0] (offset off) the way recovery
// walks a file: the magic at byte 12 first (BLANK), then size and magic.
// b must hold UnitSize bytes, except that a BLANK needs only BlankSize.
// An EntryBad entry also returns a *format.CorruptError naming the field.
func DecodeEntry(b []byte, off int64) (Entry, error) {
	if len(b) >= BlankSize && int32(binary.BigEndian.Uint32(b[unitMagicOff:])) == BlankMagic {
		return Entry{Kind: EntryBlank, Rest: int32(binary.BigEndian.Uint32(b))}, nil
	}
	u, err := DecodeUnit(b, off)
	if err != nil {
		return Entry{Kind: EntryBad, Unit: u}, err
	}
	switch {
	case u == (Unit{Offset: off}):
		return Entry{Kind: EntryZero, Unit: u}, nil
	case u.Size != UnitSize:
		return Entry{Kind: EntryBad, Unit: u}, format.Corrupt(off, "size", fmt.Errorf("%w: %d, want %d", format.ErrInvalid, u.Size, UnitSize))
	case !MagicOK(u.Magic):
		return Entry{Kind: EntryBad, Unit: u}, format.Corrupt(off+unitMagicOff, "magic", fmt.Errorf("%w: %#x", format.ErrMagic, uint32(u.Magic)))
	}
	return Entry{Kind: EntryUnit, Unit: u}, nil
}
