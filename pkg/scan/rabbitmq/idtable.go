package rabbitmq

// The scanner's id map. In lean mode (storectl scan and verify) every
// referenced msg id is known before the first status is given, so those
// ids live in one sorted, pointer-free slice built once (28 bytes an id,
// no hash-table slack: about half of a Go map's footprint) and found
// through a small bucket index on the id's leading bytes. The slice is
// mapped outside the Go heap (internal/offheap), so it costs its own 28
// bytes an id in resident memory and not the collector's headroom on top.
// Ids no queue references (garbage, or every id when the references are
// unknown) go to an ordinary map, which stays small in a healthy store.

import (
	"bytes"
	"cmp"
	"math/bits"

	"github.com/storectl/storectl/internal/offheap"
)

// idEntry is what the scanner knows of one msg id. The zero value means
// "not known".
type idEntry struct {
	set int32 // lean mode: 1 + index of the queue names in leanRefs.sets; 0: none
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

// idSlot is one sorted id with its entry.
type idSlot struct {
	id [16]byte
	e  idEntry
}

// idTable maps msg ids to entries. It is not safe for concurrent use.
type idTable struct {
	buf    *offheap.Buf[idSlot] // holds sorted; the table owns it
	sorted []idSlot             // ascending by id, unique; fixed after setSorted
	idx    idBuckets            // over sorted
	extra  map[[16]byte]idEntry
}

func newIDTable() *idTable { return &idTable{extra: map[[16]byte]idEntry{}} }

// idBuckets indexes ids sorted ascending by their leading bits: index[b]
// is the first id whose leading `shift`-bit bucket is >= b, so bucket b
// spans [index[b], index[b+1]). About 4 ids a bucket, between 2^2 and
// 2^20 buckets.
type idBuckets struct {
	buf   *offheap.Buf[int32] // holds index: off the heap, like the ids it indexes
	index []int32
	shift uint
}

// newIDBuckets indexes n ascending ids; id(i) is the i-th.
func newIDBuckets(n int, id func(i int) *[16]byte) idBuckets {
	nb := 4
	for nb < 1<<20 && nb*4 < n {
		nb <<= 1
	}
	x := idBuckets{shift: uint(32 - bits.TrailingZeros(uint(nb))), buf: offheap.New[int32]()}
	b := 0
	for i := range n {
		for k := x.of(id(i)); b <= k; b++ {
			x.buf.Append(int32(i))
		}
	}
	for ; b <= nb; b++ {
		x.buf.Append(int32(n))
	}
	x.index = x.buf.Slice()
	return x
}

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

// setSorted installs buf's slots (ascending, unique ids) as the fixed
// part; the table owns buf from then on. Ids already in extra move into it.
func (t *idTable) setSorted(buf *offheap.Buf[idSlot]) {
	slots := buf.Slice()
	t.buf, t.sorted = buf, slots
	t.idx = newIDBuckets(len(slots), func(i int) *[16]byte { return &slots[i].id })
	for id, e := range t.extra {
		if s := t.slot(id); s != nil {
			s.e = mergeEntry(s.e, e)
			delete(t.extra, id)
		}
	}
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
	if t.buf != nil {
		t.buf.Free()
	}
	t.idx.free()
	t.buf, t.sorted = nil, nil
}

// slot returns the fixed slot of id, or nil.
func (t *idTable) slot(id [16]byte) *idSlot {
	if len(t.sorted) == 0 {
		return nil
	}
	lo, hi := t.idx.span(&id)
	s := t.sorted[lo:hi]
	for len(s) > 8 {
		m := len(s) / 2
		if bytes.Compare(s[m].id[:], id[:]) <= 0 {
			s = s[m:]
		} else {
			s = s[:m]
		}
	}
	for i := range s {
		if s[i].id == id {
			return &s[i]
		}
	}
	return nil
}

// get returns id's entry (zero when unknown).
func (t *idTable) get(id [16]byte) idEntry {
	if s := t.slot(id); s != nil {
		return s.e
	}
	return t.extra[id]
}

// put sets id's entry.
func (t *idTable) put(id [16]byte, e idEntry) {
	if s := t.slot(id); s != nil {
		s.e = e
		return
	}
	t.extra[id] = e
}

// each calls fn for every known id, the fixed ones first in id order.
func (t *idTable) each(fn func(id [16]byte, e idEntry) bool) {
	for i := range t.sorted {
		if !fn(t.sorted[i].id, t.sorted[i].e) {
			return
		}
	}
	for id, e := range t.extra {
		if !fn(id, e) {
			return
		}
	}
}

// sortSlots sorts slots by id, then by entry set (stable order for equal
// ids).
func sortSlots(slots []idSlot) {
	sortByID(slots, func(s *idSlot) *[16]byte { return &s.id },
		func(a, b *idSlot) int { return cmp.Compare(a.e.set, b.e.set) })
}
