package rabbitmq

// Lean mode's queue references: msg ids as [16]byte keys, each to an
// interned sorted list of queue names, and per queue the references as
// pointer-free structs, instead of maps and slices of hex strings.

import (
	"encoding/hex"
	"fmt"
	"sort"
	"strings"

	rfmt "github.com/storectl/storectl/pkg/format/rabbitmq"
	"github.com/storectl/storectl/pkg/scan"
)

// leanRef is one shared-store reference of a queue index.
type leanRef struct {
	id   [16]byte
	seq  uint64
	slot int32
	path int32 // index into leanRefs.paths
}

// leanQueue is one queue's references, in index order.
type leanQueue struct {
	name string
	refs []leanRef
}

// leanRefs is what lean mode keeps of the queue indexes; the referenced
// ids themselves are in the scanner's seen map (idEntry.set).
type leanRefs struct {
	sets   [][]string // sorted queue names, one per reference
	paths  []string
	queues []leanQueue
}

// newLeanRefs converts the references of q into ids (entries of seen,
// which must hold no seen id yet) and drops q's QueueRefs. The name lists
// are those queueRefs makes.
func newLeanRefs(q *rfmt.VHostQueues, seen map[[16]byte]idEntry) *leanRefs {
	l := &leanRefs{}
	intern := map[string]int32{}
	set := func(names []string) int32 {
		k := strings.Join(names, "\x00")
		if i, ok := intern[k]; ok {
			return i
		}
		i := int32(len(l.sets))
		intern[k] = i
		l.sets = append(l.sets, names)
		return i
	}
	pathIdx := map[string]int32{}
	for _, qd := range q.Queues {
		name := qd.Hash
		if qd.HasName {
			name = qd.Name.Name
		}
		lq := leanQueue{name: name, refs: make([]leanRef, 0, len(qd.Refs))}
		for _, r := range qd.Refs {
			var id [16]byte
			if len(r.MsgID) != 32 {
				continue // never: the readers encode 16 bytes
			}
			if _, err := hex.Decode(id[:], []byte(r.MsgID)); err != nil {
				continue
			}
			pi, ok := pathIdx[r.Path]
			if !ok {
				pi = int32(len(l.paths))
				pathIdx[r.Path] = pi
				l.paths = append(l.paths, r.Path)
			}
			lq.refs = append(lq.refs, leanRef{id: id, seq: r.SeqID, slot: int32(r.Slot), path: pi})
			if i := seen[id].set; i > 0 {
				names := append(append([]string(nil), l.sets[i-1]...), name)
				sort.Strings(names)
				seen[id] = idEntry{set: set(names) + 1}
			} else {
				seen[id] = idEntry{set: set([]string{name}) + 1}
			}
		}
		qd.Refs = nil
		l.queues = append(l.queues, lq)
	}
	return l
}

// missingLean is missing for lean mode: the same findings, in the same
// order, from the compact references and the seen map.
func (s *scanner) missingLean(v *VHostScan) []scan.Finding {
	l := s.lrefs
	var out []scan.Finding
	for _, q := range l.queues {
		for _, r := range q.refs {
			e := s.seen[r.id]
			if e.path > 0 {
				continue
			}
			off := int64(0)
			if r.slot >= 0 {
				off = 64 + 32*int64(r.slot)
			}
			id := hexID(r.id)
			out = append(out, scan.Finding{Code: CodeMessageMissing, Severity: scan.Error,
				Path: scan.Rel(s.root, l.paths[r.path]), Offset: off, Repair: scan.RepairNone, MsgID: id,
				Details: map[string]any{"queue": q.name, "queues": l.sets[e.set-1], "seq_id": r.seq},
				Message: fmt.Sprintf("queue %s references msg %s, which no .rdq file holds; the next start drops it", q.name, id)})
		}
	}
	seen := map[string]bool{}
	for _, f := range out {
		if !seen[f.MsgID] {
			seen[f.MsgID] = true
			v.Lost = append(v.Lost, f.MsgID)
		}
	}
	sort.Strings(v.Lost)
	return out
}
