package rocketmq

import (
	"cmp"
	"container/heap"
	"encoding/binary"
	"fmt"
	"os"
	"slices"

	"github.com/storectl/storectl/internal/runsort"
	rmq "github.com/storectl/storectl/pkg/format/rocketmq"
	"github.com/storectl/storectl/pkg/scan"
)

// The slot chains of an index file link each entry to the previous entry
// of its hash slot (docs/formats/rocketmq.md §5). Checking that a prev or a
// slot head is in the right slot needs the key hash of the entry it points
// at, anywhere earlier in a file of up to 20 million entries: holding every
// entry's hash would make memory grow with the index (80 MB for a full
// file). A healthy file needs none of them: the broker links each entry to
// the newest entry of its slot, which the walk keeps per slot (indexWalk.last,
// a slot table's size). Only a pointer to another entry (a damaged file) is
// looked up, after the walk: the pointers are sorted by the entry they point
// at (runsort, spilled to temp files when there are many) and the entries
// read once in that order (chainChecks). Findings come out in the order the
// walk would have made them (orderedFindings).

// Where a finding sits in an index file's walk: the order of the phases,
// then the entry or slot number, then the check within it.
const (
	phaseEntries = iota + 1
	phaseSlots
	phaseSlotCount
	phaseReach
	phaseHeader
	phaseTail
)

// indexInMemory makes the walk hold every entry's key hash and judge the
// chains from it as they come (tests compare the two ways).
var indexInMemory = false

// chainPair is a pointer to judge: entry source's prev (pairPrev), or slot
// source's head (pairHead), points at entry target, which must hash to
// slot. A prev carries its entry's fields for the finding.
type chainPair struct {
	target, source, slot int64
	phy                  int64
	keyHash, timeDiff    int32
	prev                 int32
	kind, sub            int8
}

const (
	pairPrev = iota
	pairHead
)

var chainPairCodec = runsort.Codec[chainPair]{Size: 48,
	Append: func(b []byte, p chainPair) []byte {
		le := binary.LittleEndian
		b = le.AppendUint64(b, uint64(p.target))
		b = le.AppendUint64(b, uint64(p.source))
		b = le.AppendUint64(b, uint64(p.slot))
		b = le.AppendUint64(b, uint64(p.phy))
		b = le.AppendUint32(b, uint32(p.keyHash))
		b = le.AppendUint32(b, uint32(p.timeDiff))
		b = le.AppendUint32(b, uint32(p.prev))
		return append(b, byte(p.kind), byte(p.sub), 0, 0)
	},
	Decode: func(b []byte) chainPair {
		le := binary.LittleEndian
		return chainPair{target: int64(le.Uint64(b)), source: int64(le.Uint64(b[8:])), slot: int64(le.Uint64(b[16:])),
			phy: int64(le.Uint64(b[24:])), keyHash: int32(le.Uint32(b[32:])), timeDiff: int32(le.Uint32(b[36:])),
			prev: int32(le.Uint32(b[40:])), kind: int8(b[44]), sub: int8(b[45])}
	},
}

// chainRunLen is the pointers per sorted run (tests set it small).
var chainRunLen = 0

// chainJoin collects the pointers the walk could not judge.
type chainJoin struct {
	s *runsort.Sorter[chainPair]
}

func newChainJoin() *chainJoin {
	return &chainJoin{s: &runsort.Sorter[chainPair]{Compare: func(a, b chainPair) int { return cmp.Compare(a.target, b.target) },
		Codec: chainPairCodec, RunLen: chainRunLen}}
}

func (j *chainJoin) add(p chainPair) {
	_ = j.s.Add(p) // a spill error shows in Iter
}

func (j *chainJoin) close() { j.s.Close() }

// chainChecks judges the collected pointers: it reads the entries they
// point at in increasing order and reports each pointer at an entry of
// another slot (an entry with a negative hash is in no slot: not judged).
func (v *verifier) chainChecks(fh *os.File, w *indexWalk) error {
	if w.join == nil || w.join.s.Len() == 0 {
		return nil
	}
	it, err := w.join.s.Iter()
	if err != nil {
		return err
	}
	lay := w.lay
	buf := make([]byte, indexReadSize)
	var lo, hi int64 // entries [lo, hi) are in buf
	for it.Next() {
		p := it.Record()
		if p.target < lo || p.target >= hi {
			lo, hi = p.target, min(p.target+int64(len(buf))/rmq.IndexEntrySize, w.used)
			if err := readFull(fh, buf[:(hi-lo)*rmq.IndexEntrySize], lay.EntryOffset(lo)); err != nil {
				return err
			}
		}
		kh := int32(binary.BigEndian.Uint32(buf[(p.target-lo)*rmq.IndexEntrySize:]))
		if kh < 0 || int64(kh)%lay.Slots == p.slot {
			continue
		}
		got := int64(kh) % lay.Slots
		if p.kind == pairHead {
			w.out.add(phaseSlots, p.source, 1, v.slotHeadFinding(w, p.source, p.target, got))
			continue
		}
		e := rmq.IndexEntry{KeyHash: p.keyHash, PhyOffset: p.phy, TimeDiff: p.timeDiff, PrevIndex: p.prev}
		w.out.add(phaseEntries, p.source, int(p.sub), v.entryFinding(w, p.source, e, CodeIndexBadChain,
			fmt.Sprintf("previous entry %d is in another slot", p.target), map[string]string{"same_slot": "fail"},
			fmtInt(p.slot), fmtInt(got)))
	}
	return it.Err()
}

// orderedFindings keeps the findings of one index file that can still be
// listed — the first keep in walk order, however they arrive — and hands
// them to verifier.add in that order (which lists maxFindingsPerUnit and
// counts the rest in one note). Memory is bounded by keep.
type orderedFindings struct {
	keep int
	h    findingHeap // a max-heap: the latest kept finding on top
	seq  int
}

type keyedFinding struct {
	phase, sub int
	idx        int64
	seq        int
	f          scan.Finding
}

func newOrderedFindings(keep int) *orderedFindings { return &orderedFindings{keep: max(keep, 0)} }

func (o *orderedFindings) add(phase int, idx int64, sub int, f scan.Finding) {
	k := keyedFinding{phase: phase, idx: idx, sub: sub, seq: o.seq, f: f}
	o.seq++
	if o.keep == 0 {
		return
	}
	if len(o.h) < o.keep {
		heap.Push(&o.h, k)
		return
	}
	if later(o.h[0], k) {
		o.h[0] = k
		heap.Fix(&o.h, 0)
	}
}

// absorb adds the kept findings of o2, which ran after o in walk order
// (entries later than all of o's): the first keep of both together are
// among the first keep of each.
func (o *orderedFindings) absorb(o2 *orderedFindings) {
	for _, k := range o2.inOrder() {
		o.add(k.phase, k.idx, k.sub, k.f)
	}
}

// inOrder is a copy of the kept findings in walk order.
func (o *orderedFindings) inOrder() []keyedFinding {
	out := slices.Clone([]keyedFinding(o.h))
	slices.SortFunc(out, func(a, b keyedFinding) int {
		if later(a, b) {
			return 1
		}
		if later(b, a) {
			return -1
		}
		return 0
	})
	return out
}

// flush adds the kept findings in walk order.
func (o *orderedFindings) flush(v *verifier, key string) {
	for _, k := range o.inOrder() {
		v.add(key, k.f)
	}
	o.h = nil
}

// later reports whether a comes after b in walk order.
func later(a, b keyedFinding) bool {
	if a.phase != b.phase {
		return a.phase > b.phase
	}
	if a.idx != b.idx {
		return a.idx > b.idx
	}
	if a.sub != b.sub {
		return a.sub > b.sub
	}
	return a.seq > b.seq
}

type findingHeap []keyedFinding

func (h findingHeap) Len() int           { return len(h) }
func (h findingHeap) Less(i, j int) bool { return later(h[i], h[j]) }
func (h findingHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *findingHeap) Push(x any)        { *h = append(*h, x.(keyedFinding)) }
func (h *findingHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
