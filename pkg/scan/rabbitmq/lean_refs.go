package rabbitmq

// Lean mode's queue references: msg ids as [16]byte keys, each to an
// interned sorted list of queue names, instead of maps and slices of hex
// strings.

import (
	"encoding/hex"
	"sort"
	"strings"

	rfmt "github.com/storectl/storectl/pkg/format/rabbitmq"
	"github.com/storectl/storectl/pkg/scan"
)

// leanRefs is what lean mode keeps of the queue indexes: the interned
// name lists. The referenced ids themselves are in the scanner's seen map
// (idEntry.set); the references are read again only when one of them is
// found in no .rdq (missingLean), which keeps memory flat in the common
// case.
type leanRefs struct {
	dir  string     // the vhost dir, to read the references again
	sets [][]string // sorted queue names, one per reference
}

// newLeanRefs converts the references of q into ids (entries of seen,
// which must hold no seen id yet) and drops q's QueueRefs. The name lists
// are those queueRefs makes.
func newLeanRefs(q *rfmt.VHostQueues, seen map[[16]byte]idEntry) *leanRefs {
	l := &leanRefs{dir: q.Dir}
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
	for _, qd := range q.Queues {
		name := queueName(qd)
		for _, r := range qd.Refs {
			id, ok := decodeID(r.MsgID)
			if !ok {
				continue // never: the readers encode 16 bytes
			}
			if i := seen[id].set; i > 0 {
				names := append(append([]string(nil), l.sets[i-1]...), name)
				sort.Strings(names)
				seen[id] = idEntry{set: set(names) + 1}
			} else {
				seen[id] = idEntry{set: set([]string{name}) + 1}
			}
		}
		qd.Refs = nil
	}
	return l
}

func queueName(qd *rfmt.QueueDir) string {
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

// missingLean is missing for lean mode: the same findings, in the same
// order. Only when some referenced id was found in no .rdq are the queue
// references read again, to report each reference.
func (s *scanner) missingLean(v *VHostScan) []scan.Finding {
	l := s.lrefs
	lost := false
	for _, e := range s.seen {
		if e.set > 0 && e.path == 0 {
			lost = true
			break
		}
	}
	if !lost {
		return nil
	}
	q, err := rfmt.ReadVHostQueuesRefs(l.dir)
	if err != nil {
		return nil // read once already: only a concurrent change gets here
	}
	var out []scan.Finding
	for _, qd := range q.Queues {
		name := queueName(qd)
		for _, r := range qd.Refs {
			id, ok := decodeID(r.MsgID)
			if !ok {
				continue
			}
			e := s.seen[id]
			if e.path > 0 || e.set == 0 {
				continue
			}
			out = append(out, s.missingFinding(r, name, l.sets[e.set-1]))
		}
	}
	v.Lost = lostIDs(out)
	return out
}
