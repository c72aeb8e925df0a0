package ra

// ra segment files (ra_log_segment.erl, same layout in ra 2.2.0, 2.14.0
// and 2.16.13): an 8-byte header, MaxCount fixed index slots, then the
// entry data.
//
//	"RASG" | Version:16 (1 or 2) | MaxCount:16
//	slot v1 (28 B): Index:64 | Term:64 | Offset:32 | Length:32 | CRC:32
//	slot v2 (32 B): Index:64 | Term:64 | Offset:64 | Length:32 | CRC:32
//
// Data starts at 8 + MaxCount*slot size; Offset is absolute in the file.
// CRC is the IEEE CRC-32 of the entry data (0: not computed). ra reads
// slots up to the first all-zero one; a slot whose Index is lower than
// the previous one drops the earlier slots with a higher Index (an
// overwrite after a leader change).

import (
	"cmp"
	"encoding/binary"
	"slices"

	"github.com/storectl/storectl/internal/crc32x"
	"github.com/storectl/storectl/pkg/format"
)

// Segment file constants.
const (
	SegmentMagic     = "RASG"
	SegmentVersion   = 2 // what every ra since 1.1.0 writes
	SegmentHeaderLen = 8
	SegmentSlotV1    = 28
	SegmentSlotV2    = 32
	// DefaultSegmentMaxEntries is ra's segment_max_entries default.
	DefaultSegmentMaxEntries = 4096
)

// SegmentHeader is a segment's 8-byte header.
type SegmentHeader struct {
	Version  uint16
	MaxCount uint16
}

// SlotSize is the size of one index slot for the header's version.
func (h SegmentHeader) SlotSize() int {
	if h.Version == 1 {
		return SegmentSlotV1
	}
	return SegmentSlotV2
}

// DataStart is where ra expects the entry data: after MaxCount slots.
func (h SegmentHeader) DataStart() int64 {
	return SegmentHeaderLen + int64(h.MaxCount)*int64(h.SlotSize())
}

// DecodeSegmentHeader decodes the header. ra's read_header accepts any
// version up to 2 ("RASG" with version 0 included); anything else is
// invalid_segment_format, here ErrMagic or ErrUnsupported.
func DecodeSegmentHeader(b []byte) (SegmentHeader, error) {
	if len(b) < SegmentHeaderLen {
		return SegmentHeader{}, format.Corrupt(int64(len(b)), "header", format.ErrShort)
	}
	if string(b[:4]) != SegmentMagic {
		return SegmentHeader{}, format.Corrupt(0, "magic", format.ErrMagic)
	}
	h := SegmentHeader{Version: binary.BigEndian.Uint16(b[4:6]), MaxCount: binary.BigEndian.Uint16(b[6:8])}
	if h.Version > SegmentVersion {
		return h, format.Corrupt(4, "version", format.ErrUnsupported)
	}
	return h, nil
}

// AppendSegmentHeader appends h.
func AppendSegmentHeader(b []byte, h SegmentHeader) []byte {
	b = append(b, SegmentMagic...)
	b = binary.BigEndian.AppendUint16(b, h.Version)
	return binary.BigEndian.AppendUint16(b, h.MaxCount)
}

// SegmentSlot is one index slot.
type SegmentSlot struct {
	Slot   int   // position in the index table, from 0
	Pos    int64 // file offset of the slot
	Index  uint64
	Term   uint64
	Offset uint64 // file offset of the entry data
	Length uint32
	CRC    uint32 // CRC-32 of the data as stored; 0 = not computed
}

// IsZero reports an all-zero slot, where ra stops reading the index.
func (s SegmentSlot) IsZero() bool {
	return s.Index == 0 && s.Term == 0 && s.Offset == 0 && s.Length == 0 && s.CRC == 0
}

// CRCOK reports whether ra's validate_checksum accepts data for the slot.
func (s SegmentSlot) CRCOK(data []byte) bool {
	return s.CRC == 0 || s.CRC == crc32x.ChecksumIEEE(data)
}

// DecodeSegmentSlot decodes the slot at b[0] for a header version.
func DecodeSegmentSlot(b []byte, version uint16) (SegmentSlot, error) {
	var s SegmentSlot
	c := format.Cursor{B: b}
	s.Index = c.U64("index")
	s.Term = c.U64("term")
	if version == 1 {
		s.Offset = uint64(c.U32("offset"))
	} else {
		s.Offset = c.U64("offset")
	}
	s.Length = c.U32("length")
	s.CRC = c.U32("crc")
	return s, c.Err(0)
}

// AppendSegmentSlot appends s in the slot layout of version.
func AppendSegmentSlot(b []byte, s SegmentSlot, version uint16) []byte {
	b = binary.BigEndian.AppendUint64(b, s.Index)
	b = binary.BigEndian.AppendUint64(b, s.Term)
	if version == 1 {
		b = binary.BigEndian.AppendUint32(b, uint32(s.Offset))
	} else {
		b = binary.BigEndian.AppendUint64(b, s.Offset)
	}
	b = binary.BigEndian.AppendUint32(b, s.Length)
	return binary.BigEndian.AppendUint32(b, s.CRC)
}

// SegmentIndex is a decoded index table: the slots ra reads (up to the
// first zero slot) and the index map it builds from them.
type SegmentIndex struct {
	Header SegmentHeader
	// Slots are the slots before the first zero slot, in table order.
	Slots []SegmentSlot
	// live maps a Raft index to its position in Slots after ra's trim:
	// a slot with a lower Index than its predecessor drops the earlier
	// slots with a higher Index (LivePos). It is nil while every slot's
	// index is above the one before (a segment as ra writes it): then
	// every slot is live at its own position, and no map is built (that
	// map had been a tenth of a quorum scan's CPU).
	live map[uint64]int
	// Trimmed lists the positions in Slots that a later slot dropped.
	Trimmed []int
	// Partial is set when the table ends inside a slot (a file shorter
	// than the table but longer than its last whole slot): ra 2.2.0-2.16
	// fail to parse such an index (function_clause) and the member does
	// not start.
	Partial bool
	// TableEnd is where the index table read by ra ends in the file.
	TableEnd int64
}

// LiveCount is the number of live indexes.
func (x *SegmentIndex) LiveCount() int {
	if x.live == nil {
		return len(x.Slots)
	}
	return len(x.live)
}

// LivePos returns the position in Slots of the live slot of Raft index idx.
func (x *SegmentIndex) LivePos(idx uint64) (int, bool) {
	if x.live == nil {
		i, ok := slices.BinarySearchFunc(x.Slots, idx, func(s SegmentSlot, idx uint64) int { return cmp.Compare(s.Index, idx) })
		return i, ok
	}
	p, ok := x.live[idx]
	return p, ok
}

// LivePositions returns the positions in Slots of the live slots, in
// table order.
func (x *SegmentIndex) LivePositions() []int {
	out := make([]int, 0, x.LiveCount())
	if x.live == nil {
		for i := range x.Slots {
			out = append(out, i)
		}
		return out
	}
	for _, p := range x.live {
		out = append(out, p)
	}
	slices.Sort(out)
	return out
}

// Range returns the lowest and highest live indexes; ok is false for an
// empty index.
func (x *SegmentIndex) Range() (first, last uint64, ok bool) {
	if x.live == nil {
		if len(x.Slots) == 0 {
			return 0, 0, false
		}
		return x.Slots[0].Index, x.Slots[len(x.Slots)-1].Index, true
	}
	for i := range x.live {
		if !ok || i < first {
			first = i
		}
		if !ok || i > last {
			last = i
		}
		ok = true
	}
	return first, last, ok
}

// DecodeSegmentIndex decodes the index table of maxCount slots (the
// header's MaxCount, or what the writer meant when it overflowed), table =
// the bytes from offset 8 up to the data start (fewer when the file is
// shorter).
func DecodeSegmentIndex(h SegmentHeader, table []byte, maxCount int) *SegmentIndex {
	return decodeSegmentIndex(h, table, maxCount, nil)
}

// decodeSegmentIndex is DecodeSegmentIndex with the slots appended to
// slots[:0] when it holds them all (else to a new slice).
func decodeSegmentIndex(h SegmentHeader, table []byte, maxCount int, slots []SegmentSlot) *SegmentIndex {
	size := h.SlotSize()
	if n := min(maxCount, len(table)/size); cap(slots) < n {
		slots = make([]SegmentSlot, 0, n)
	}
	x := &SegmentIndex{Header: h, Slots: slots[:0]}
	var last uint64
	n := 0
	for ; n+size <= len(table) && n/size < maxCount; n += size {
		s, _ := DecodeSegmentSlot(table[n:n+size], h.Version)
		if s.IsZero() {
			break
		}
		s.Slot = n / size
		s.Pos = SegmentHeaderLen + int64(n)
		if x.live == nil {
			if len(x.Slots) == 0 || s.Index > last {
				last = s.Index
				x.Slots = append(x.Slots, s)
				continue
			}
			// a slot at or below its predecessor: from here on, the map
			x.live = make(map[uint64]int, min(maxCount, len(table)/size))
			for i, p := range x.Slots {
				x.live[p.Index] = i
			}
		}
		if s.Index < last {
			for idx, p := range x.live {
				if idx > s.Index {
					delete(x.live, idx)
					x.Trimmed = append(x.Trimmed, p)
				}
			}
		}
		last = s.Index
		if p, ok := x.live[s.Index]; ok {
			x.Trimmed = append(x.Trimmed, p)
		}
		x.live[s.Index] = len(x.Slots)
		x.Slots = append(x.Slots, s)
	}
	x.TableEnd = SegmentHeaderLen + int64(n)
	// The loop stopped on a zero slot, at MaxCount, or with fewer than a
	// slot's bytes left: ra fails on those bytes only in the last case.
	if n/size < maxCount && n < len(table) && len(table)-n < size {
		x.Partial = true
	}
	return x
}
