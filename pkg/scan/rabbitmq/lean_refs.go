package rabbitmq

// The scan's queue references: msg ids as [16]byte keys, each to an
// interned sorted list of queue names, instead of maps and slices of hex
// strings.

import (
	"encoding/hex"
	"sort"
	"strings"
	"sync"

	"github.com/storectl/storectl/internal/offheap"
	"github.com/storectl/storectl/internal/runsort"
	"github.com/storectl/storectl/pkg/scan"
)

// leanRefs is what the scan keeps of the queue indexes: the interned
// name lists. The referenced ids themselves are in the scanner's seen map
// (idEntry.set); the references are read again only when one of them is
// found in no .rdq (missingLean), which keeps memory flat in the common
// case.
type leanRefs struct {
	dir  string     // the vhost dir, to read the references again
	sets [][]string // sorted queue names, one per reference
}

// leanRefsBuilder collects the references of a vhost's queue dirs as id
// slots while ReadVHostQueuesRefsFunc reads them (take is safe for
// concurrent use); build then makes the lean references.
type leanRefsBuilder struct {
	mu    sync.Mutex
	slots *offheap.Buf[refSlot] // q: the queue dir's ordinal in ord
	ord   map[*QueueDir]int32
	// files and maxSize describe the persistent store's .rdq files, for
	// the table's packing (newIDPack); 0 when unknown.
	files   int
	maxSize int64
	// join says whether the references may spill (joinspill.go); sorter
	// holds them once they have.
	join   joinSpill
	sorter *runsort.Sorter[refSlot]
}

func (b *leanRefsBuilder) take(qd *QueueDir, refs []QueueRef) {
	b.mu.Lock()
	if b.ord == nil {
		b.ord = map[*QueueDir]int32{}
		b.slots = offheap.New[refSlot]()
	}
	o, ok := b.ord[qd]
	if !ok {
		o = int32(len(b.ord))
		b.ord[qd] = o
	}
	if sorter := b.sorter; sorter != nil {
		// Spilled: each reading goroutine fills, sorts and writes runs
		// of its own, outside the lock (until 2026-12-07 the lock was
		// held while a run was sorted and written, which made the
		// queue dirs' read one goroutine at a time).
		b.mu.Unlock()
		sorter.AddN(len(refs), func(i int) refSlot { return refSlot{id: refs[i].ID, q: o} }) // its error is kept for Iter
		return
	}
	defer b.mu.Unlock()
	for _, r := range refs {
		b.slots.Append(refSlot{id: r.ID, q: o})
	}
	if b.join.allow && b.slots.Len() > b.join.refLimit() {
		b.takeSpill()
	}
}

// build turns the collected references into the fixed part of seen
// (idTable.setSorted). The name lists are those queueRefs makes: the
// sorted names of every queue reference to the id.
func (b *leanRefsBuilder) build(q *VHostQueues, seen *idTable) *leanRefs {
	l := &leanRefs{dir: q.Dir}
	names := make([]string, len(q.Queues))
	index := make([]int32, len(b.ord)) // ordinal -> index in q.Queues
	for i := range index {
		index[i] = -1 // a dir that failed part way is not in q.Queues
	}
	for qi, qd := range q.Queues {
		names[qi] = queueName(qd)
		if o, ok := b.ord[qd]; ok {
			index[o] = int32(qi)
		}
	}
	buf := b.slots
	if buf == nil { // no queue dir had a reference
		buf = offheap.New[refSlot]()
	}
	slots := buf.Slice()
	b.slots, b.ord = nil, nil
	kept := slots[:0]
	for _, s := range slots {
		if s.q = index[s.q]; s.q >= 0 {
			kept = append(kept, s)
		}
	}
	slots = kept
	sortRefs(slots)
	single := make([]int32, len(names)) // 1 + set of a queue's name alone
	set := l.interner()
	// Each id once, with 1 + its set in q.
	out := slots[:0]
	for i := 0; i < len(slots); {
		j := i + 1
		for j < len(slots) && slots[j].id == slots[i].id {
			j++
		}
		var si int32
		if qi := slots[i].q; j == i+1 {
			if single[qi] == 0 {
				single[qi] = set([]string{names[qi]}) + 1
			}
			si = single[qi] - 1
		} else {
			ns := make([]string, 0, j-i)
			for _, sl := range slots[i:j] {
				ns = append(ns, names[sl.q])
			}
			sort.Strings(ns)
			si = set(ns)
		}
		out = append(out, refSlot{id: slots[i].id, q: si + 1})
		i = j
	}
	// Packed into the table's slots (idfixed.go), the references' pages
	// given back as they are passed; those past the unique ids (an id's
	// second and later references) at once.
	buf.Truncate(len(out))
	pack := newIDPack(len(l.sets), b.files, b.maxSize)
	fixed := newFixedIDs(len(out), pack)
	var wide []refSlot // sets past 2^30: none in practice
	for i := range out {
		r := &out[i]
		v, ok := pack.encode(idEntry{set: r.q})
		if !ok {
			wide = append(wide, *r)
		}
		fixed.add(&r.id, v)
		if i%(1<<14) == 0 {
			buf.Discard(i)
		}
	}
	fixed.done()
	buf.Free()
	seen.setFixed(fixed, pack)
	for _, r := range wide { // after setFixed: keep what it merged from extra
		seen.put(r.id, mergeEntry(idEntry{set: r.q}, seen.get(r.id)))
	}
	return l
}

// queueName is the name a queue dir's findings and references use: its
// .queue_name's queue name, or the dir's hash when that is unreadable.
func queueName(qd *QueueDir) string {
	if qd.HasName {
		return qd.Name.Name
	}
	return qd.Hash
}

func decodeID(s string) (id [16]byte, ok bool) {
	if len(s) != 32 {
		return id, false
	}
	_, err := hex.Decode(id[:], []byte(s))
	return id, err == nil
}

// missingLean is missing's work, in queue order. Only when some referenced id was found in no .rdq are the queue
// references read again, to report each reference.
func (s *scanner) missingLean(v *VHostScan) []scan.Finding {
	l := s.lrefs
	lost := false
	get := s.seen.get
	if s.sj != nil {
		lost = len(s.sj.missing) > 0
		get = func(id [16]byte) idEntry {
			if set, ok := s.sj.missing[id]; ok {
				return idEntry{set: set} // referenced, no copy found
			}
			return idEntry{first: 1} // found (or not referenced): skipped below
		}
	} else {
		s.seen.each(func(_ [16]byte, e idEntry) bool {
			lost = e.set > 0 && e.path() == 0
			return !lost
		})
	}
	if !lost {
		return nil
	}
	q, err := ReadVHostQueuesRefs(l.dir)
	if err != nil {
		return nil // read once already: only a concurrent change gets here
	}
	var out []scan.Finding
	unread := v.Unread()
	for _, qd := range q.Queues {
		name := queueName(qd)
		last, any := lastFoundSeq(qd.Refs, func(r QueueRef) bool { return get(r.ID).path() > 0 })
		for _, r := range qd.Refs {
			e := get(r.ID)
			if e.path() > 0 || e.set == 0 {
				continue
			}
			r.MsgID = hexID(r.ID)
			out = append(out, s.missingFinding(r, name, l.sets[e.set-1], unread, !any || r.SeqID > last))
		}
	}
	v.Lost = lostIDs(out)
	return out
}

// interner returns a function that gives each distinct queue-name set
// (sorted names) one index into l.sets, appending a set on first sight.
func (l *leanRefs) interner() func(ns []string) int32 {
	intern := map[string]int32{}
	return func(ns []string) int32 {
		k := strings.Join(ns, "\x00")
		if i, ok := intern[k]; ok {
			return i
		}
		i := int32(len(l.sets))
		intern[k] = i
		l.sets = append(l.sets, ns)
		return i
	}
}
