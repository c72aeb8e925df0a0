package rabbitmq

// The harden simulator: one .rdq file held in memory with the planned gap
// rewrites applied, and the scanner-hazard rules of pkg/scan/rabbitmq
// (rscan.FileHazards: generation-1 stop and crash, generation-2 zero-hole
// misread and §3.4 prediction, off-by-nine windows of generations 2 and
// 3) re-run on it as a fresh scan would see the rewritten file: a dummy
// record is an unreferenced record there, 0xFF filler is still a gap.

import (
	"cmp"
	"slices"

	rfmt "github.com/storectl/storectl/pkg/format/rabbitmq"
	rscan "github.com/storectl/storectl/pkg/scan/rabbitmq"
)

// scope says which scanner generations' hazards harden removes.
type scope struct {
	gen1, gen2 bool
	obn2, obn3 bool // off-by-nine windows in gaps (gen 2) / walked by gen 3
}

// scopeFor returns the scope of a broker version ("" = every generation).
func scopeFor(ver string) scope {
	if ver == "" {
		return scope{gen1: true, gen2: true, obn2: true, obn3: true}
	}
	// A bad version fails the vhost scan harden runs first.
	major, minor, patch, _ := rfmt.ParseVersion(ver)
	switch gen, o := rfmt.ScanOptionsFor(major, minor, patch); gen {
	case 1:
		return scope{gen1: true}
	case 2:
		return scope{gen2: true, obn2: true}
	default:
		return scope{obn3: !o.OffByNineFix}
	}
}

// simRec is a record as a fresh scan of the rewritten file sees it.
type simRec struct {
	off, total int64
	id         [16]byte
	status     string
	dummy      bool // written by this plan
}

func (r simRec) end() int64 { return r.off + r.total }

func (r simRec) live() bool {
	return rscan.LiveStatus(r.status)
}

// simGap is a gap between records (never the tail) and its planned fill.
type simGap struct {
	rscan.Gap
	fill     string // "" (untouched), FillDummy or FillFF
	id       [16]byte
	stuck    bool // no rewrite removes its hazard
	codes    []string
	versions []string
	// prot is the records the misreads in it would lose (sim.protect).
	prot protectSet
}

// simHazard is one hazard of the simulated file.
type simHazard struct {
	code     string
	off      int64
	versions string
	victims  []simRec
	gap      int // index into sim.gaps of the gap to rewrite; -1: none
	inside   *simRec
}

// sim is one file with the planned rewrites applied to b.
type sim struct {
	path string
	b    []byte
	orig []simRec
	gaps []*simGap
	sc   scope
	// liveIDs numbers the distinct ids of the live original records (for
	// the validating models' located set), made by the first run.
	liveIDs map[[16]byte]int32
	// seen is the map the models' ScanData calls reuse.
	seen map[[16]byte]bool
	// spare holds runs no longer needed (recycle), whose slices the next
	// run reuses; hr is hazards' scratch. A run of a 16 MiB file of small
	// messages allocated about 15 MB, and a file takes up to ~180 runs:
	// the garbage set harden's peak RSS.
	spare []*models
	hr    []rscan.HazardRecord
}

// scanBuf is the storage for a model's records: old's, from a recycled
// run, else new room for every record and dummy.
func (s *sim) scanBuf(old []rfmt.ScanRecord) []rfmt.ScanRecord {
	if old != nil {
		return old
	}
	return make([]rfmt.ScanRecord, 0, len(s.orig)+len(s.gaps))
}

// recycle hands m's storage to the next run: m must not be used again
// (its hazards point into its records).
func (s *sim) recycle(m *models) {
	if m != nil && len(s.spare) < 2 {
		s.spare = append(s.spare, &models{recs: m.recs, gen2: m.gen2, gen3: m.gen3})
	}
}

// records returns the original records and the planned dummies in file order.
func (s *sim) records(dst []simRec) []simRec {
	var dummies []simRec
	for _, g := range s.gaps {
		if g.fill == FillDummy {
			dummies = append(dummies, simRec{off: g.Offset, total: g.Length, id: g.id, status: rscan.StatusUnreferenced, dummy: true})
		}
	}
	slices.SortFunc(dummies, func(a, b simRec) int { return cmp.Compare(a.off, b.off) })
	// A merge: s.orig is in file order (newSim), and a dummy fills a gap,
	// never where a record starts (a full sort per run was a tenth of
	// harden's CPU).
	out := slices.Grow(dst[:0], len(s.orig)+len(dummies))
	i := 0
	for _, d := range dummies {
		for i < len(s.orig) && s.orig[i].off < d.off {
			out = append(out, s.orig[i])
			i++
		}
		out = append(out, d)
	}
	return append(out, s.orig[i:]...)
}

// gapAt returns the index of the gap holding off (any fill but a dummy
// counts: a dummy is a record to the scanner, yet it is ours to rewrite).
func (s *sim) gapAt(off int64) int {
	for i, g := range s.gaps {
		if off >= g.Offset && off < g.Offset+g.Length {
			return i
		}
	}
	return -1
}

// models is one run of every scanner model on the simulated bytes.
type models struct {
	gen1    rfmt.ScanGen1Result
	gen1Err error
	gen2    []rfmt.ScanRecord
	gen3    [3][]rfmt.ScanRecord // plain, large-message shortcut, off-by-nine fix
	recs    []simRec
	hazards []simHazard
	inScope int    // in-scope hazards plus their original-record victims
	lost    [5]int // per model: original records it no longer finds
	lostSum int
}

// run runs the models and the hazard analysis on s.b, in the storage of
// a recycled run when there is one.
func (s *sim) run() *models {
	m := &models{}
	var old models
	if n := len(s.spare); n > 0 {
		old, s.spare = *s.spare[n-1], s.spare[:n-1]
	}
	m.recs = s.records(old.recs)
	m.gen1, m.gen1Err = rfmt.ScanGen1(s.b)
	if s.seen == nil {
		s.seen = make(map[[16]byte]bool, len(s.orig)+len(s.gaps))
	}
	m.gen2 = rfmt.ScanData(s.b, rfmt.ScanOptions{Seen: s.seen, Buf: s.scanBuf(old.gen2)})
	if s.liveIDs == nil {
		s.liveIDs = map[[16]byte]int32{}
		for _, r := range s.orig {
			if _, ok := s.liveIDs[r.id]; r.live() && !ok {
				s.liveIDs[r.id] = int32(len(s.liveIDs))
			}
		}
	}
	located := make([]bool, len(s.liveIDs))
	for i, o := range []rfmt.ScanOptions{{}, {LargeMessageShortcut: true}, {LargeMessageShortcut: true, OffByNineFix: true}} {
		clear(located)
		o.Seen, o.Buf = s.seen, s.scanBuf(old.gen3[i])
		o.Valid = func(r rfmt.ScanRecord) rfmt.Validity {
			if k, ok := s.liveIDs[r.MsgID]; ok && !located[k] {
				located[k] = true
				return rfmt.Valid
			}
			return rfmt.Invalid
		}
		m.gen3[i] = rfmt.ScanData(s.b, o)
	}
	m.hazards = s.hazards(m.recs)
	for _, h := range m.hazards {
		m.inScope++
		for _, v := range h.victims {
			if !v.dummy {
				m.inScope++
			}
		}
	}
	s.losses(m)
	return m
}

// hazards runs rscan.FileHazards on the simulated bytes, as a fresh scan
// of the rewritten file would (records: the originals and the dummies;
// gaps: those not covered by a dummy, and the tail), and keeps the
// hazards of the versions in scope, generation 1 first, then the
// misreads, then the off-by-nine windows.
func (s *sim) hazards(recs []simRec) []simHazard {
	hr := slices.Grow(s.hr[:0], len(recs))[:len(recs)]
	s.hr = hr
	for i, r := range recs {
		hr[i] = rscan.HazardRecord{Offset: r.off, TotalSize: r.total, MsgID: r.id, Status: r.status}
	}
	at := func(off int64) int {
		if i, ok := recIndex(recs, off); ok {
			return i
		}
		return 0 // never: every victim is one of recs (the map this replaced gave 0 too)
	}
	var gaps []rscan.Gap
	for _, g := range s.gaps {
		if g.fill != FillDummy {
			gaps = append(gaps, g.Gap)
		}
	}
	if t := s.tail(recs); t < len(s.b) {
		gaps = append(gaps, rscan.Gap{Offset: int64(t), Length: int64(len(s.b) - t)})
	}
	var gen1, gen2, obn []simHazard
	for _, h := range rscan.FileHazards(s.b, hr, gaps, true) {
		sh := simHazard{code: h.Code, off: h.Offset, versions: h.Versions, gap: s.gapAt(h.Offset)}
		for _, v := range h.Victims {
			sh.victims = append(sh.victims, recs[at(v.Offset)])
		}
		switch h.Code {
		case rscan.CodeScannerCrash, rscan.CodeGen1Stop:
			if !s.sc.gen1 {
				continue
			}
			if h.Code == rscan.CodeGen1Stop {
				sh.gap = -1
				for i, g := range s.gaps { // the first gap between the stop and the first victim
					if g.Offset+g.Length > h.Offset && g.Offset < sh.victims[0].off {
						sh.gap = i
						break
					}
				}
			}
			gen1 = append(gen1, s.locate(sh, recs))
		case rscan.CodeZeroHoleMisread:
			if s.sc.gen2 {
				gen2 = append(gen2, s.locate(sh, recs))
			}
		case rscan.CodeOffByNine:
			g2, g3 := slices.Contains(h.Gens, 2), slices.Contains(h.Gens, 3)
			if !(g2 && s.sc.obn2) && !(g3 && s.sc.obn3) {
				continue
			}
			sh.versions = rscan.VersionsGen3Unfixed
			if g2 {
				sh.versions = rscan.VersionsGen2
			}
			obn = append(obn, s.locate(sh, recs))
		}
	}
	return append(append(gen1, gen2...), obn...)
}

// tail returns where the tail gap starts (end of the last record).
func (s *sim) tail(recs []simRec) int {
	t := 0
	for _, r := range recs {
		t = max(t, int(r.end()))
	}
	return t
}

// locate fills h.inside when the hazard lies inside an original record.
func (s *sim) locate(h simHazard, recs []simRec) simHazard {
	if h.gap >= 0 {
		return h
	}
	for i := range recs {
		if r := recs[i]; !r.dummy && h.off >= r.off && h.off < r.end() {
			h.inside = &recs[i]
			break
		}
	}
	return h
}
