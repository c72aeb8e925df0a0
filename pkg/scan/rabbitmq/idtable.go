package rabbitmq

// The scanner's id map. Every
// referenced msg id is known before the first status is given, so those
// ids live in one sorted, pointer-free table built once and found through
// a small bucket index on the id's leading bytes (fixedIDs, idfixed.go):
// each slot is the id less the bytes its bucket implies and its entry
// packed into as few bytes as the scan's shape needs (idPack: the field
// widths are chosen per scan from the number of queue-name sets and files
// and the largest file), 20 bytes an id for the bench stores, with no
// hash-table slack; an entry whose values do not fit the widths goes to a
// small map instead. The table is mapped outside the Go heap
// (internal/offheap), so it costs its own bytes in resident memory and
// not the collector's headroom on top. Ids no queue references (garbage,
// or every id when the references are unknown) go to an idHash
// (idhash.go), which stays small in a healthy store.

import (
	"cmp"
	"math/bits"

	"github.com/storectl/storectl/internal/offheap"
)

// idEntry is what the scanner knows of one msg id. The zero value means
// "not known".
type idEntry struct {
	set int32 // 1 + index of the queue names in leanRefs.sets; 0: none
	// first: bits 0-27 are 1 + the index into scanner.paths of the first
	// copy's file (0: not seen yet); bits 28-31 are, in verify, the at-risk
	// keys of the hazards that lose the id (verify_victims.go).
	first uint32
	off   uint32 // offset of the first copy (files are at most MaxFileSize bytes)
}

const (
	maxPaths  = 1<<28 - 1 // files a scan can tell apart in idEntry.first
	riskShift = 28
)

// path returns 1 + the index of the first copy's file, 0 if none was seen.
func (e idEntry) path() int32 { return int32(e.first & maxPaths) }

func (e *idEntry) setPath(p int32) { e.first = e.first&^maxPaths | uint32(p) }

// risk returns the at-risk key bits (bit k: atRiskKeys[k]).
func (e idEntry) risk() uint8 { return uint8(e.first >> riskShift) }

func (e *idEntry) addRisk(bits uint8) { e.first |= uint32(bits) << riskShift }

// idPack says how an entry packs into at most 60 bits, low bits first:
// set (setBits), path (pathBits), the 4 risk bits, offset (offBits). A set
// field of all ones marks an entry held in idTable.wide instead.
type idPack struct{ setBits, pathBits, offBits uint }

// newIDPack fits sets queue-name sets (idEntry.set up to sets), files
// files and offsets below maxOff into 60 bits (files or maxOff 0:
// unknown, then up to maxPaths files and 32-bit offsets). Each field gets
// what it needs (the offset at least 18 bits) while they fit, and no
// more: the packed entry's bytes are part of every fixed slot. Else the
// path field, then the offset one, get less, and a value past its field
// makes a wide entry (correct, only larger).
func newIDPack(sets, files int, maxOff int64) idPack {
	set, path, off := min(bits.Len(uint(sets+1)), 30), 28, 32
	if files > 0 {
		path = bits.Len(uint(files + 1))
	}
	if maxOff > 0 {
		off = max(bits.Len64(uint64(maxOff-1)), 18) // offsets are below maxOff
	}
	const room = 60 - 4 // the risk bits take 4
	if set+path+off > room {
		path = max(room-set-off, min(path, 8))
		off = room - set - path // what is left (at least 18 bits)
	}
	return idPack{setBits: uint(set), pathBits: uint(path), offBits: uint(off)}
}

func (p idPack) wideMark() uint64 { return 1<<p.setBits - 1 }

// encode packs e; false when a value does not fit.
func (p idPack) encode(e idEntry) (uint64, bool) {
	set, path, off := uint64(e.set), uint64(e.path()), uint64(e.off)
	if e.set < 0 || set >= p.wideMark() || path >= 1<<p.pathBits || off >= 1<<p.offBits {
		return p.wideMark(), false
	}
	return set | path<<p.setBits | uint64(e.risk())<<(p.setBits+p.pathBits) | off<<(p.setBits+p.pathBits+4), true
}

// decode unpacks v; false for a wide entry.
func (p idPack) decode(v uint64) (idEntry, bool) {
	set := v & p.wideMark()
	if set == p.wideMark() {
		return idEntry{}, false
	}
	var e idEntry
	e.set = int32(set)
	e.setPath(int32(v >> p.setBits & (1<<p.pathBits - 1)))
	e.addRisk(uint8(v >> (p.setBits + p.pathBits) & 15))
	e.off = uint32(v >> (p.setBits + p.pathBits + 4))
	return e, true
}

// idTable maps msg ids to entries. It is not safe for concurrent use
// (concurrent gets are).
type idTable struct {
	fixed *fixedIDs // the fixed part (idfixed.go); nil before setFixed
	pack  idPack
	wide  map[[16]byte]idEntry // fixed ids whose entries do not pack
	extra idHash               // the ids outside the fixed part
}

func newIDTable() *idTable {
	return &idTable{wide: map[[16]byte]idEntry{}}
}

// idBuckets indexes ids sorted ascending by their leading bits: index[b]
// is the first id whose leading `shift`-bit bucket is >= b, so bucket b
// spans [index[b], index[b+1]). About 4 ids a bucket, between 2^2 and
// 2^20 buckets.
type idBuckets struct {
	buf   *offheap.Buf[int32] // holds index: off the heap, like the ids it indexes
	index []int32
	shift uint
	next  int // while adding: the first bucket not yet started
}

// newIDBuckets indexes n ascending ids; id(i) is the i-th.
func newIDBuckets(n int, id func(i int) *[16]byte) idBuckets {
	x := newIDBucketsFor(n)
	for i := range n {
		x.add(i, id(i))
	}
	x.finish(n)
	return x
}

// newIDBucketsFor starts an index of n ascending ids, given to add one by
// one and then finish.
func newIDBucketsFor(n int) idBuckets {
	nb := 4
	for nb < 1<<20 && nb*4 < n {
		nb <<= 1
	}
	return idBuckets{shift: uint(32 - bits.TrailingZeros(uint(nb))), buf: offheap.New[int32]()}
}

// add indexes id as the i-th (ids come in ascending order).
func (x *idBuckets) add(i int, id *[16]byte) {
	for k := x.of(id); x.next <= k; x.next++ {
		x.buf.Append(int32(i))
	}
}

// finish closes the index after the n-th id.
func (x *idBuckets) finish(n int) {
	for nb := 1 << (32 - x.shift); x.next <= nb; x.next++ {
		x.buf.Append(int32(n))
	}
	x.index = x.buf.Slice()
}

// impliedBytes returns how many leading bytes of an id its bucket says.
func (x *idBuckets) impliedBytes() int { return int(32-x.shift) / 8 }

// free gives back the index's memory; x is empty afterwards.
func (x *idBuckets) free() {
	if x.buf != nil {
		x.buf.Free()
	}
	*x = idBuckets{}
}

func (x *idBuckets) of(id *[16]byte) int {
	return int(uint64(id[0])<<24|uint64(id[1])<<16|uint64(id[2])<<8|uint64(id[3])) >> x.shift
}

// span returns the range of positions id's bucket holds (empty when none
// was indexed).
func (x *idBuckets) span(id *[16]byte) (lo, hi int) {
	if len(x.index) == 0 {
		return 0, 0
	}
	b := x.of(id)
	return int(x.index[b]), int(x.index[b+1])
}

// last returns the index of the last id equal to id among the indexed
// ones (idAt(i) is the i-th), or -1: a binary search of id's bucket for
// the last id <= id, a few ids long.
func (x *idBuckets) last(id *[16]byte, idAt func(i int) *[16]byte) int {
	lo, hi := x.span(id)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if compareID(idAt(m), id) <= 0 {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo > 0 && *idAt(lo - 1) == *id {
		return lo - 1
	}
	return -1
}

// setFixed installs f (complete: done was called; its entries packed
// with pack) as the fixed part; the table owns f from then on. Ids
// already in extra move into it.
func (t *idTable) setFixed(f *fixedIDs, pack idPack) {
	t.fixed, t.pack = f, pack
	if t.extra.len() == 0 {
		return
	}
	old := t.extra
	t.extra = idHash{}
	old.each(func(id [16]byte, e idEntry) bool {
		if i := t.find(id); i >= 0 {
			t.setAt(i, &id, mergeEntry(t.at(i, &id), e))
		} else {
			t.extra.put(id, e)
		}
		return true
	})
	old.free()
}

func mergeEntry(fixed, found idEntry) idEntry {
	if p := found.path(); p > 0 {
		fixed.setPath(p)
		fixed.off = found.off
	}
	fixed.addRisk(found.risk())
	return fixed
}

// free gives back the fixed part's memory; the table is empty afterwards.
func (t *idTable) free() {
	if t.fixed != nil {
		t.fixed.free()
	}
	t.extra.free()
	t.fixed, t.wide = nil, map[[16]byte]idEntry{}
}

// find returns the index of id's fixed slot, or -1.
func (t *idTable) find(id [16]byte) int {
	if t.fixed == nil {
		return -1
	}
	return t.fixed.find(&id)
}

// warm readies the table for finding id(0) ... id(n-1) next (any n): see
// fixedIDs.warm. Lookups are the same with or without it.
func (t *idTable) warm(n int, id func(i int) *[16]byte) {
	if t.fixed == nil {
		return
	}
	for from := 0; from < n; from += warmBatch {
		t.fixed.warm(min(warmBatch, n-from), func(i int) *[16]byte { return id(from + i) })
	}
}

// at returns the entry of fixed slot i, which holds id.
func (t *idTable) at(i int, id *[16]byte) idEntry {
	if e, ok := t.pack.decode(t.fixed.val(i)); ok {
		return e
	}
	return t.wide[*id]
}

// setAt sets the entry of fixed slot i, which holds id.
func (t *idTable) setAt(i int, id *[16]byte, e idEntry) {
	v, ok := t.pack.encode(e)
	if !ok {
		t.wide[*id] = e
	} else if t.fixed.val(i)&t.pack.wideMark() == t.pack.wideMark() {
		delete(t.wide, *id)
	}
	t.fixed.setVal(i, v)
}

// lookup returns id's entry (zero when unknown) and its fixed slot, -1
// when id is not among the fixed ids: a caller that reads an entry and
// then sets it (classify, once a record) searches the table once.
func (t *idTable) lookup(id [16]byte) (slot int, e idEntry) {
	if i := t.find(id); i >= 0 {
		return i, t.at(i, &id)
	}
	e, _ = t.extra.get(id)
	return -1, e
}

// store sets id's entry; slot is what lookup returned for id.
func (t *idTable) store(slot int, id [16]byte, e idEntry) {
	if slot >= 0 {
		t.setAt(slot, &id, e)
		return
	}
	t.extra.put(id, e)
}

// get returns id's entry (zero when unknown).
func (t *idTable) get(id [16]byte) idEntry {
	_, e := t.lookup(id)
	return e
}

// put sets id's entry.
func (t *idTable) put(id [16]byte, e idEntry) { t.store(t.find(id), id, e) }

// each calls fn for every known id, the fixed ones first in id order.
func (t *idTable) each(fn func(id [16]byte, e idEntry) bool) {
	if t.fixed != nil && !t.fixed.each(func(i int, id [16]byte) bool { return fn(id, t.at(i, &id)) }) {
		return
	}
	t.extra.each(fn)
}

// refSlot is a queue reference while the fixed part is built
// (leanRefsBuilder): the id and the queue dir's ordinal, then the id and
// 1 + its queue-name set. 20 bytes, so the references of a large store
// take less than the table they become.
type refSlot struct {
	id [16]byte
	q  int32
}

// sortRefs sorts refs by id, then by q.
func sortRefs(refs []refSlot) {
	sortByID(refs, func(s *refSlot) *[16]byte { return &s.id },
		func(a, b *refSlot) int { return cmp.Compare(a.q, b.q) })
}
