package rocketmq

import (
	"fmt"

	"github.com/storectl/storectl/pkg/format"
)

// Index file geometry (§5): header, then hash slots, then entries.
const (
	IndexHeaderSize = 40
	IndexSlotSize   = 4
	IndexEntrySize  = 20
	// DefaultIndexSlots and DefaultIndexEntries are maxHashSlotNum and
	// maxIndexNum; 40 + 5e6*4 + 2e7*20 = 420000040 bytes.
	DefaultIndexSlots   = 5000000
	DefaultIndexEntries = 20000000
	// MaxIndexSlots bounds a slot count derived from a file size, so a
	// hostile size can't make a caller loop for ever: the default times 100.
	MaxIndexSlots = 100 * DefaultIndexSlots
)

// IndexHeader is the 40-byte IndexHeader.
type IndexHeader struct {
	BeginTimestamp int64
	EndTimestamp   int64
	BeginPhyOffset int64
	EndPhyOffset   int64
	HashSlotCount  int32
	IndexCount     int32 // next entry number; starts at 1
}

// DecodeIndexHeader decodes an index file header at b[0].
func DecodeIndexHeader(b []byte, off int64) (IndexHeader, error) {
	c := format.Cursor{B: b}
	h := IndexHeader{
		BeginTimestamp: int64(c.U64("beginTimestamp")),
		EndTimestamp:   int64(c.U64("endTimestamp")),
		BeginPhyOffset: int64(c.U64("beginPhyOffset")),
		EndPhyOffset:   int64(c.U64("endPhyOffset")),
		HashSlotCount:  int32(c.U32("hashSlotCount")),
		IndexCount:     int32(c.U32("indexCount")),
	}
	return h, c.Err(off)
}

// IndexEntry is one 20-byte index entry.
type IndexEntry struct {
	KeyHash   int32 // IndexKeyHash of topic#key
	PhyOffset int64 // commitlog physical offset
	TimeDiff  int32 // seconds since the header's BeginTimestamp
	PrevIndex int32 // previous entry in the same slot; 0 ends the chain
}

// DecodeIndexEntry decodes an index entry at b[0].
func DecodeIndexEntry(b []byte, off int64) (IndexEntry, error) {
	c := format.Cursor{B: b}
	e := IndexEntry{
		KeyHash:   int32(c.U32("keyHash")),
		PhyOffset: int64(c.U64("phyOffset")),
		TimeDiff:  int32(c.U32("timeDiff")),
		PrevIndex: int32(c.U32("prevIndex")),
	}
	return e, c.Err(off)
}

// IndexLayout is the slot and entry count of one index file; they are
// not stored in the file.
type IndexLayout struct {
	Slots   int64
	Entries int64
}

// Size is the file size the layout implies.
func (l IndexLayout) Size() int64 {
	return IndexHeaderSize + l.Slots*IndexSlotSize + l.Entries*IndexEntrySize
}

// SlotOffset is the file offset of slot s.
func (l IndexLayout) SlotOffset(s int64) int64 { return IndexHeaderSize + s*IndexSlotSize }

// EntryOffset is the file offset of entry n.
func (l IndexLayout) EntryOffset(n int64) int64 {
	return IndexHeaderSize + l.Slots*IndexSlotSize + n*IndexEntrySize
}

// IndexLayoutFromSize derives the layout of a file of size bytes. With
// slots > 0 the entry count follows from it; with slots == 0 the broker's
// default ratio of 4 entries per slot is assumed. It fails when the size
// does not fit exactly.
func IndexLayoutFromSize(size, slots int64) (IndexLayout, error) {
	body := size - IndexHeaderSize
	if body < 0 || slots < 0 || slots > MaxIndexSlots {
		return IndexLayout{}, format.Corrupt(0, "fileSize", format.ErrInvalid)
	}
	if slots == 0 {
		const per = IndexSlotSize + 4*IndexEntrySize
		if body%per != 0 {
			return IndexLayout{}, format.Corrupt(0, "fileSize", fmt.Errorf("%w: %d bytes is not 40 + 84*n", format.ErrInvalid, size))
		}
		slots = body / per
		return IndexLayout{Slots: slots, Entries: 4 * slots}, nil
	}
	rest := body - slots*IndexSlotSize
	if rest < 0 || rest%IndexEntrySize != 0 {
		return IndexLayout{}, format.Corrupt(0, "fileSize", format.ErrInvalid)
	}
	return IndexLayout{Slots: slots, Entries: rest / IndexEntrySize}, nil
}
