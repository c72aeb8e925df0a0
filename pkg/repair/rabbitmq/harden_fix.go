package rabbitmq

// The fixed point: a gap's hazard can hide the next one (a generation-1
// scanner stops at the first zero word, so the models never looked past
// it). The planner rewrites the first gap an in-scope hazard points at in
// its in-memory copy, re-runs every model, and repeats until no in-scope
// hazard is left or none can be removed by rewriting a gap.

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/storectl/storectl/internal/bitset"
	rscan "github.com/storectl/storectl/pkg/scan/rabbitmq"
)

// maxTries bounds how often one gap is rewritten: a first fill, then the
// other fills if a later hazard points at it again.
const maxTries = 3

// newSim builds the simulator of f, whose bytes are b.
func newSim(f *rscan.FileScan, b []byte, sc scope) *sim {
	s := &sim{path: f.Path, b: b, sc: sc}
	for _, r := range f.Records {
		s.orig = append(s.orig, simRec{off: r.Offset, total: r.TotalSize, id: r.MsgID, status: r.Status})
	}
	// In file order (the scan lists them so): origIndex searches it.
	slices.SortStableFunc(s.orig, func(a, b simRec) int { return cmp.Compare(a.off, b.off) })
	for _, g := range f.Gaps {
		if g.Offset+g.Length < f.Size { // the tail protects nothing: nothing follows it
			s.gaps = append(s.gaps, &simGap{Gap: g})
		}
	}
	return s
}

// fix runs the fixed point and returns the hazards left and the rounds run.
// Rounds are bounded by maxTries per gap plus one: every round rewrites a
// gap or marks one stuck.
func (s *sim) fix(alloc *idAlloc) (left []simHazard, rounds int) {
	cur := s.run()
	tries := make([]int, len(s.gaps))
	for rounds = 1; rounds <= maxTries*len(s.gaps)+1; rounds++ {
		gi := -1
		for _, h := range cur.hazards {
			if h.gap >= 0 && !s.gaps[h.gap].stuck && (gi < 0 || s.gaps[h.gap].Offset < s.gaps[gi].Offset) {
				gi = h.gap
			}
		}
		if gi < 0 {
			break
		}
		g := s.gaps[gi]
		for _, h := range cur.hazards {
			if h.gap == gi {
				g.codes = appendNew(g.codes, h.code)
				g.versions = appendNew(g.versions, h.versions)
				for _, v := range h.victims {
					if !v.dummy {
						s.protect(g, v)
					}
				}
			}
		}
		tries[gi]++
		if next := s.try(g, cur, alloc); next != nil {
			s.recycle(cur)
			cur = next
		} else {
			g.stuck = true
		}
		if tries[gi] >= maxTries {
			g.stuck = true
		}
	}
	return cur.hazards, rounds
}

// try rewrites g with each fill other than its current one and keeps the
// best that makes no model lose a record it found and scores strictly
// better (fewer in-scope hazards and victims, then fewer records lost by
// all models); nil (g unchanged) when none does.
func (s *sim) try(g *simGap, cur *models, alloc *idAlloc) *models {
	from, to := g.Offset, g.Offset+g.Length
	keep := append([]byte(nil), s.b[from:to]...)
	keepFill, keepID := g.fill, g.id
	type cand struct {
		fill string
		data []byte
		id   [16]byte
	}
	var cands []cand
	if g.Length >= MinDummyRecord && g.fill != FillDummy {
		id := alloc.id()
		cands = append(cands, cand{FillDummy, DummyRecord(g.Length, id), id})
	}
	if g.fill != FillFF {
		cands = append(cands, cand{fill: FillFF, data: filler(g.Length)})
	}
	if g.Length >= MinSkipFrame && g.fill != FillSkip {
		cands = append(cands, cand{fill: FillSkip, data: SkipFrame(g.Length)})
	}
	var best *models
	bestI := -1
	for i, c := range cands {
		copy(s.b[from:to], c.data)
		g.fill, g.id = c.fill, c.id
		m := s.run()
		if noRegression(cur, m) && better(m, cur) && (best == nil || better(m, best)) {
			s.recycle(best)
			best, bestI = m, i
		} else {
			s.recycle(m)
		}
	}
	if best == nil {
		copy(s.b[from:to], keep)
		g.fill, g.id = keepFill, keepID
		return nil
	}
	c := cands[bestI]
	copy(s.b[from:to], c.data)
	g.fill, g.id = c.fill, c.id
	return best
}

func filler(n int64) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = 0xFF
	}
	return b
}

// noRegression reports whether no model loses more records in m than in cur.
func noRegression(cur, m *models) bool {
	for i := range m.lost {
		if m.lost[i] > cur.lost[i] {
			return false
		}
	}
	return true
}

// better orders states: fewer in-scope hazards and victims, then fewer
// records lost by all models.
func better(a, b *models) bool {
	if a.inScope != b.inScope {
		return a.inScope < b.inScope
	}
	return a.lostSum < b.lostSum
}

// unfixed turns a hazard left after the fixed point into its report.
func (s *sim) unfixed(h simHazard, rounds int) UnfixedHazard {
	u := UnfixedHazard{Path: s.path, Code: h.code, Offset: h.off, Versions: h.versions, Victims: []string{}, VictimCount: len(h.victims)}
	name := func(v simRec) string { return recName(v) + " (" + v.status + ")" }
	for _, v := range h.victims[:min(len(h.victims), rscan.InlineVictims)] {
		u.Victims = append(u.Victims, name(v))
	}
	if len(h.victims) > rscan.InlineVictims {
		u.LastVictim = name(h.victims[len(h.victims)-1])
	}
	if keepLists {
		for _, v := range h.victims {
			u.all = append(u.all, name(v))
		}
	}
	switch {
	case h.inside != nil:
		u.Why = fmt.Sprintf("lies inside the %s record %s@%d: removing it means changing a record, which harden never does; salvage the victims (storectl salvage --select lost) or run a broker version without this scanner bug",
			h.inside.status, hexID(h.inside.id), h.inside.off)
	case h.gap < 0:
		u.Why = "lies in the tail after the last record or in no gap harden may rewrite (storectl truncate handles tails)"
	default:
		g := s.gaps[h.gap]
		why := []string{}
		switch {
		case g.Length < MinSkipFrame:
			why = append(why, fmt.Sprintf("the %d-byte gap is too short for any frame (generation 1 needs %d bytes to step over one)", g.Length, MinSkipFrame))
		case g.Length < MinDummyRecord:
			why = append(why, fmt.Sprintf("the %d-byte gap is too short for a dummy record (%d bytes)", g.Length, MinDummyRecord))
		}
		why = append(why, fmt.Sprintf("no rewrite of the gap at %d (+%d) removes it without another scanner model (%s) losing a record", g.Offset, g.Length, strings.Join(modelNames[:], ", ")))
		u.Why = strings.Join(why, "; ")
	}
	u.Why += fmt.Sprintf(" (after %d planning round(s))", rounds)
	return u
}

// protectSet is the records a gap protects: a bit per original record
// of the file (sim.orig) and, for the report, how many, the first
// rscan.InlineVictims in the order first seen and the last one. A
// generation-1 stop's victims are every record after the gap: the list
// of "id@offset" strings this replaced (with a set of them) held 2.5
// million strings for one 16 MiB file of small messages, and harden of a
// 64 MiB store took 886 MiB.
type protectSet struct {
	bits bitset.Set
	n    int
	head []simRec
	last simRec
}

// protect adds v, an original record, to the records g protects, once.
func (s *sim) protect(g *simGap, v simRec) {
	i, ok := s.origIndex(v.off)
	if !ok || s.orig[i].id != v.id {
		return // not an original record (a dummy of this plan)
	}
	p := &g.prot
	if p.bits == nil {
		p.bits = bitset.New(int64(len(s.orig)))
	}
	if p.bits.Has(int64(i)) {
		return
	}
	p.bits.Add(int64(i))
	p.n++
	if len(p.head) < rscan.InlineVictims {
		p.head = append(p.head, v)
	}
	p.last = v
}

// origIndex is the index in s.orig of the record at off.
func (s *sim) origIndex(off int64) (int, bool) { return recIndex(s.orig, off) }

// recIndex is the index in rs (in file order, one record per offset) of
// the record at off.
func recIndex(rs []simRec, off int64) (int, bool) {
	return slices.BinarySearchFunc(rs, off, func(r simRec, off int64) int { return cmp.Compare(r.off, off) })
}

// each calls fn with every protected record, in file order.
func (p *protectSet) each(orig []simRec, fn func(simRec)) {
	p.bits.Each(func(i int64) { fn(orig[i]) })
}

func recName(v simRec) string { return fmt.Sprintf("%s@%d", hexID(v.id), v.off) }

func appendNew(s []string, x string) []string {
	for _, y := range s {
		if y == x {
			return s
		}
	}
	return append(s, x)
}
