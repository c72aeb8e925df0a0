package rabbitmq

// The fixed point: a gap's hazard can hide the next one (a generation-1
// scanner stops at the first zero word, so the models never looked past
// it). The planner rewrites the first gap an in-scope hazard points at in
// its in-memory copy, re-runs every model, and repeats until no in-scope
// hazard is left or none can be removed by rewriting a gap.

import (
	"fmt"
	"strings"

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
						g.protect(v)
					}
				}
			}
		}
		tries[gi]++
		if next := s.try(g, cur, alloc); next != nil {
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
			best, bestI = m, i
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
	u := UnfixedHazard{Path: s.path, Code: h.code, Offset: h.off, Versions: h.versions, Victims: []string{}}
	for _, v := range h.victims {
		u.Victims = append(u.Victims, fmt.Sprintf("%s@%d (%s)", hexID(v.id), v.off, v.status))
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

// protect adds v to the records g protects, once, in the order first
// seen. A generation-1 stop's victims are every record after the gap, so
// a set, not a search of the list: appendNew's search made harden
// quadratic in a file's records (70% of its CPU on an 8 MiB store).
func (g *simGap) protect(v simRec) {
	k := protectKey{v.id, v.off}
	if _, ok := g.protected[k]; ok {
		return
	}
	if g.protected == nil {
		g.protected = map[protectKey]struct{}{}
	}
	g.protected[k] = struct{}{}
	g.protects = append(g.protects, fmt.Sprintf("%s@%d", hexID(v.id), v.off))
}

// protectKey is a protected record: its id and offset.
type protectKey struct {
	id  [16]byte
	off int64
}

func appendNew(s []string, x string) []string {
	for _, y := range s {
		if y == x {
			return s
		}
	}
	return append(s, x)
}
