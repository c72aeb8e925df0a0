package timer

import (
	"encoding/binary"
	"fmt"
	"io"

	"github.com/storectl/storectl/pkg/format"
)

// Wheel geometry (TimerWheel.java, TimerMessageStore.TIMER_WHEEL_TTL_DAY).
const (
	SlotSize = 32 // Slot.SIZE
	// SlotsTotal is TIMER_WHEEL_TTL_DAY * DAY_SECS: 7 days of ticks,
	// whatever the precision.
	SlotsTotal = 7 * 86400
	// WheelSlots is the number of slots in the file: twice SlotsTotal.
	WheelSlots = 2 * SlotsTotal
	// WheelSize is the only non-zero length TimerWheel accepts:
	// 38,707,200 bytes ("Timer wheel length:%d != expected:%s" otherwise).
	WheelSize = WheelSlots * SlotSize
	// DefaultPrecisionMs is timerPrecisionMs's default.
	DefaultPrecisionMs = 1000
	// BlankSlots is TIMER_BLANK_SLOTS: recovery starts reading no earlier
	// than now - SlotsTotal*precision + BlankSlots*precision.
	BlankSlots = 60
)

// Slot is one timer wheel slot (Slot.java). Time is stored as
// timeMs / precisionMs.
type Slot struct {
	Time     int64 // the slot's absolute time in precision units
	FirstPos int64 // timerlog offset of the oldest unit
	LastPos  int64 // the newest unit: the head of the prevPos chain
	Num      int32 // units put minus DELETE units
	Magic    int32 // "no use now"
}

// IsZero reports an all-zero (never written) slot.
func (s Slot) IsZero() bool { return s == Slot{} }

// TimeMs is the slot's time in milliseconds for precisionMs.
func (s Slot) TimeMs(precisionMs int64) int64 { return s.Time * precisionMs }

// SlotIndex is TimerWheel.getSlotIndex: where the slot for timeMs sits.
func SlotIndex(timeMs, precisionMs int64) int {
	if precisionMs <= 0 {
		precisionMs = DefaultPrecisionMs
	}
	i := timeMs / precisionMs % WheelSlots
	if i < 0 { // Java's % keeps the sign; a negative index throws there
		i += WheelSlots
	}
	return int(i)
}

// DecodeSlot decodes the 32 bytes at b[0]; off is the wheel file offset
// of b[0]. Only a short b is an error.
func DecodeSlot(b []byte, off int64) (Slot, error) {
	c := format.Cursor{B: b}
	s := Slot{
		Time:     int64(c.U64("timeMs")),
		FirstPos: int64(c.U64("firstPos")),
		LastPos:  int64(c.U64("lastPos")),
		Num:      int32(c.U32("num")),
		Magic:    int32(c.U32("magic")),
	}
	return s, c.Err(off)
}

// AppendSlot appends the 32-byte encoding of s.
func AppendSlot(dst []byte, s Slot) []byte {
	dst = binary.BigEndian.AppendUint64(dst, uint64(s.Time))
	dst = binary.BigEndian.AppendUint64(dst, uint64(s.FirstPos))
	dst = binary.BigEndian.AppendUint64(dst, uint64(s.LastPos))
	dst = binary.BigEndian.AppendUint32(dst, uint32(s.Num))
	return binary.BigEndian.AppendUint32(dst, uint32(s.Magic))
}

// wheelChunk is how much of the wheel ReadWheel reads at once.
const wheelChunk = 1 << 20

// ReadWheel calls fn for every non-zero slot of a wheel file of size
// bytes, in index order. size must be WheelSize (a *format.CorruptError
// otherwise: TimerWheel refuses any other non-zero length). An all-zero
// chunk costs one read and a scan for a non-zero byte; the caller may
// skip sparse holes by handing a reader that returns zeros for them.
func ReadWheel(ra io.ReaderAt, size int64, fn func(index int, s Slot) error) error {
	if size != WheelSize {
		return format.Corrupt(0, "length", fmt.Errorf("%w: timer wheel is %d bytes, want %d", format.ErrInvalid, size, WheelSize))
	}
	buf := make([]byte, wheelChunk)
	for off := int64(0); off < size; off += wheelChunk {
		n := min(int64(wheelChunk), size-off)
		b := buf[:n]
		if k, err := ra.ReadAt(b, off); int64(k) < n {
			if err == nil || err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return fmt.Errorf("reading timer wheel at %d: %w", off, err)
		}
		for p := 0; p < len(b); p += SlotSize {
			if zero32(b[p : p+SlotSize]) {
				continue
			}
			s, _ := DecodeSlot(b[p:p+SlotSize], off+int64(p))
			if err := fn(int((off+int64(p))/SlotSize), s); err != nil {
				return err
			}
		}
	}
	return nil
}

func zero32(b []byte) bool {
	return binary.LittleEndian.Uint64(b) == 0 && binary.LittleEndian.Uint64(b[8:]) == 0 &&
		binary.LittleEndian.Uint64(b[16:]) == 0 && binary.LittleEndian.Uint64(b[24:]) == 0
}
