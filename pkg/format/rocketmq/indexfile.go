package rocketmq

import (
	"encoding/binary"
	"fmt"

	"github.com/storectl/storectl/pkg/format"
)

// Index file geometry (docs/formats/rocketmq.md §5): header, then hash
// slots, then entries.
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

// AppendIndexHeader appends the IndexHeaderSize bytes of h
// (IndexHeader.updateByteBuffer).
func AppendIndexHeader(dst []byte, h IndexHeader) []byte {
	be := binary.BigEndian
	dst = be.AppendUint64(dst, uint64(h.BeginTimestamp))
	dst = be.AppendUint64(dst, uint64(h.EndTimestamp))
	dst = be.AppendUint64(dst, uint64(h.BeginPhyOffset))
	dst = be.AppendUint64(dst, uint64(h.EndPhyOffset))
	dst = be.AppendUint32(dst, uint32(h.HashSlotCount))
	return be.AppendUint32(dst, uint32(h.IndexCount))
}

// DecodeIndexSlot decodes the hash slot at b[0]: the number of the
// newest entry of its chain, 0 for an empty slot.
func DecodeIndexSlot(b []byte, off int64) (int32, error) {
	c := format.Cursor{B: b}
	v := int32(c.U32("slot"))
	return v, c.Err(off)
}

// AppendIndexSlot appends the IndexSlotSize bytes of a hash slot.
func AppendIndexSlot(dst []byte, entry int32) []byte {
	return binary.BigEndian.AppendUint32(dst, uint32(entry))
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

// IndexEntryOf decodes the entry in b, which holds IndexEntrySize bytes
// (DecodeIndexEntry without the length check, for walks over whole
// entries).
func IndexEntryOf(b *[IndexEntrySize]byte) IndexEntry {
	be := binary.BigEndian
	return IndexEntry{KeyHash: int32(be.Uint32(b[0:])), PhyOffset: int64(be.Uint64(b[4:])),
		TimeDiff: int32(be.Uint32(b[12:])), PrevIndex: int32(be.Uint32(b[16:]))}
}

// AppendIndexEntry appends the IndexEntrySize bytes of e.
func AppendIndexEntry(dst []byte, e IndexEntry) []byte {
	be := binary.BigEndian
	dst = be.AppendUint32(dst, uint32(e.KeyHash))
	dst = be.AppendUint64(dst, uint64(e.PhyOffset))
	dst = be.AppendUint32(dst, uint32(e.TimeDiff))
	return be.AppendUint32(dst, uint32(e.PrevIndex))
}

// PutIndexKey is IndexFile.putKey on an index file that is not full,
// held as its header h and its hash slots (len(slots) is the layout's
// slot count): it returns the entry to write as entry number
// h.IndexCount (as it was before the call) and updates h and slots the
// way the broker does. The caller checks fullness (h.IndexCount against
// the layout's entry count) first.
func PutIndexKey(h *IndexHeader, slots []int32, keyHash int32, phy, storeTS int64) IndexEntry {
	slot := int64(keyHash) % int64(len(slots))
	if slot < 0 { // Math.abs(keyHash) is taken by the caller's hash; keep the index valid anyway
		slot = -slot
	}
	prev := slots[slot]
	if prev <= 0 || prev > h.IndexCount {
		prev = 0
	}
	// timeDiff is computed before the first entry overwrites beginTimestamp.
	diff := (storeTS - h.BeginTimestamp) / 1000
	switch {
	case h.BeginTimestamp <= 0:
		diff = 0
	case diff > 1<<31-1:
		diff = 1<<31 - 1
	case diff < 0:
		diff = 0
	}
	e := IndexEntry{KeyHash: keyHash, PhyOffset: phy, TimeDiff: int32(diff), PrevIndex: prev}
	slots[slot] = h.IndexCount
	if h.IndexCount <= 1 {
		h.BeginPhyOffset, h.BeginTimestamp = phy, storeTS
	}
	if prev == 0 {
		h.HashSlotCount++
	}
	h.IndexCount++
	h.EndPhyOffset, h.EndTimestamp = phy, storeTS
	return e
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
