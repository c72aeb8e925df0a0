package rabbitmq

// The id table's map for ids outside its fixed part: ids no queue
// references (garbage awaiting compaction: a twentieth of a store's
// records or more), or every id when the references are unknown. A Go
// map of them cost 60 bytes an id on the heap, and the collector's
// headroom on top; this one is open addressing with linear probing over
// 32-byte slots mapped outside the heap (internal/offheap), 3/8 to 3/4
// full (it doubles past 3/4): 43-85 bytes an id, and nothing for the
// collector. Slots are found by a seeded hash (hash/maphash), so ids
// chosen to collide (a hostile store) cannot make probes long.

import (
	"hash/maphash"

	"github.com/storectl/storectl/internal/offheap"
)

// hslot is one slot of an idHash.
type hslot struct {
	id   [16]byte
	e    idEntry
	used uint32
}

// idHash maps ids to entries. Its zero value is empty and ready to use;
// it is not safe for concurrent use (concurrent gets are).
type idHash struct {
	buf   *offheap.Buf[hslot]
	slots []hslot // len is a power of two, or 0
	n     int
	seed  maphash.Seed
}

const idHashMin = 1024 // slots of a new table: 32 KiB

func (h *idHash) len() int { return h.n }

// find returns the slot that holds id, or the empty slot where it would
// go; -1 when the table has no slots.
func (h *idHash) find(id *[16]byte) int {
	if len(h.slots) == 0 {
		return -1
	}
	mask := len(h.slots) - 1
	for i := int(maphash.Comparable(h.seed, *id)) & mask; ; i = (i + 1) & mask {
		if s := &h.slots[i]; s.used == 0 || s.id == *id {
			return i
		}
	}
}

// get returns id's entry; ok is false (and e zero) when id is not held.
func (h *idHash) get(id [16]byte) (e idEntry, ok bool) {
	if i := h.find(&id); i >= 0 && h.slots[i].used != 0 {
		return h.slots[i].e, true
	}
	return idEntry{}, false
}

// put sets id's entry.
func (h *idHash) put(id [16]byte, e idEntry) {
	if (h.n+1)*4 > len(h.slots)*3 {
		h.grow()
	}
	s := &h.slots[h.find(&id)]
	if s.used == 0 {
		s.id, s.used = id, 1
		h.n++
	}
	s.e = e
}

// grow doubles the slots (or makes the first ones) and puts every id
// again.
func (h *idHash) grow() {
	old, oldBuf := h.slots, h.buf
	if h.buf == nil {
		h.seed = maphash.MakeSeed()
	}
	size := max(idHashMin, 2*len(old))
	h.buf = offheap.New[hslot]()
	h.slots, h.n = h.buf.Extend(size), 0
	for i := range old {
		if old[i].used != 0 {
			h.put(old[i].id, old[i].e)
		}
	}
	if oldBuf != nil {
		oldBuf.Free()
	}
}

// each calls fn for every id held, in slot order, until fn returns false.
func (h *idHash) each(fn func(id [16]byte, e idEntry) bool) bool {
	for i := range h.slots {
		if s := &h.slots[i]; s.used != 0 && !fn(s.id, s.e) {
			return false
		}
	}
	return true
}

// free gives the slots' memory back; h is empty afterwards.
func (h *idHash) free() {
	if h.buf != nil {
		h.buf.Free()
	}
	*h = idHash{}
}
