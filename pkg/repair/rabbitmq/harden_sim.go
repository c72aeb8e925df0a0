package rabbitmq

// The harden simulator: one .rdq file held in memory with the planned gap
// rewrites applied, and the scanner-hazard analysis of pkg/scan/rabbitmq
// (hazards.go: generation-1 stop and crash, generation-2 zero-hole
// misread and §3.4 prediction, off-by-nine windows of generations 2 and
// 3) re-run on it as a fresh scan would see the rewritten file: a dummy
// record is an unreferenced record there, 0xFF filler is still a gap.

import (
	"bytes"
	"encoding/binary"
	"errors"
	"sort"

	"github.com/storectl/storectl/pkg/format"
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

func (r simRec) victim() rscan.Victim {
	return rscan.Victim{ID: r.id, Offset: r.off, Size: r.total, Status: r.status}
}

func (r simRec) live() bool {
	return r.status == rscan.StatusReferenced || r.status == rscan.StatusUnknown
}

// simGap is a gap between records (never the tail) and its planned fill.
type simGap struct {
	rscan.Gap
	fill     string // "" (untouched), FillDummy or FillFF
	id       [16]byte
	stuck    bool // no rewrite removes its hazard
	codes    []string
	versions []string
	protects []string
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
}

// records returns the original records and the planned dummies in file order.
func (s *sim) records() []simRec {
	out := append([]simRec(nil), s.orig...)
	for _, g := range s.gaps {
		if g.fill == FillDummy {
			out = append(out, simRec{off: g.Offset, total: g.Length, id: g.id, status: rscan.StatusUnreferenced, dummy: true})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].off < out[j].off })
	return out
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

// run runs the models and the hazard analysis on s.b.
func (s *sim) run() *models {
	m := &models{recs: s.records()}
	m.gen1, m.gen1Err = rfmt.ScanGen1(s.b)
	m.gen2 = rfmt.ScanData(s.b, rfmt.ScanOptions{})
	live := map[[16]byte]bool{}
	for _, r := range s.orig {
		if r.live() {
			live[r.id] = true
		}
	}
	for i, o := range []rfmt.ScanOptions{{}, {LargeMessageShortcut: true}, {LargeMessageShortcut: true, OffByNineFix: true}} {
		located := map[[16]byte]bool{}
		o.Valid = func(r rfmt.ScanRecord) rfmt.Validity {
			if live[r.MsgID] && !located[r.MsgID] {
				located[r.MsgID] = true
				return rfmt.Valid
			}
			return rfmt.Invalid
		}
		m.gen3[i] = rfmt.ScanData(s.b, o)
	}
	if s.sc.gen1 {
		m.hazards = append(m.hazards, s.gen1Hazards(m)...)
	}
	if s.sc.gen2 {
		m.hazards = append(m.hazards, s.misreadHazards(m)...)
	}
	if s.sc.obn2 || s.sc.obn3 {
		m.hazards = append(m.hazards, s.offByNineHazards(m.recs)...)
	}
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

// gen1Hazards is hazards.go gen1: a crash, or the records never reached.
func (s *sim) gen1Hazards(m *models) []simHazard {
	var ce *format.CorruptError
	if m.gen1Err != nil && errors.As(m.gen1Err, &ce) {
		h := simHazard{code: rscan.CodeScannerCrash, off: ce.Offset, versions: rscan.VersionsGen1, victims: m.recs, gap: s.gapAt(ce.Offset)}
		return []simHazard{s.locate(h, m.recs)}
	}
	found := map[int64]bool{}
	for _, r := range m.gen1.Records {
		found[r.Offset] = true
	}
	stop := int64(0)
	var vs []simRec
	for _, r := range m.recs {
		if found[r.off] {
			if len(vs) == 0 {
				stop = r.end()
			}
			continue
		}
		vs = append(vs, r)
	}
	if len(vs) == 0 {
		return nil
	}
	h := simHazard{code: rscan.CodeGen1Stop, off: stop, versions: rscan.VersionsGen1, victims: vs, gap: -1}
	for i, g := range s.gaps { // the first gap between the stop and the first victim
		if g.Offset+g.Length > stop && g.Offset < vs[0].off {
			h.gap = i
			break
		}
	}
	return []simHazard{s.locate(h, m.recs)}
}

// misreadHazards is hazards.go misread: bogus generation-2 frames that
// hide records, and §3.4 predictions the model did not reproduce.
func (s *sim) misreadHazards(m *models) []simHazard {
	real := map[int64]int64{}
	for _, r := range m.recs {
		real[r.off] = r.total
	}
	found := map[int64]bool{}
	var bogus []rfmt.ScanRecord
	for _, c := range m.gen2 {
		if t, ok := real[c.Offset]; ok && t == c.TotalSize {
			found[c.Offset] = true
		} else {
			bogus = append(bogus, c)
		}
	}
	var out []simHazard
	hit := map[int64]int64{}
	for _, c := range bogus {
		hit[c.Offset] = c.TotalSize
		h := simHazard{code: rscan.CodeZeroHoleMisread, off: c.Offset, versions: rscan.VersionsGen2, gap: s.gapAt(c.Offset)}
		for _, r := range m.recs {
			if !found[r.off] && r.off > c.Offset && r.off < c.Offset+c.TotalSize {
				h.victims = append(h.victims, r)
			}
		}
		if len(h.victims) > 0 {
			out = append(out, s.locate(h, m.recs))
		}
	}
	for off, size := range predicted34(s.b, m.recs) {
		if hit[off] == size {
			continue
		}
		h := simHazard{code: rscan.CodeZeroHoleMisread, off: off, versions: rscan.VersionsGen2, gap: s.gapAt(off)}
		for _, r := range m.recs {
			if r.off > off && r.off < off+size {
				h.victims = append(h.victims, r)
			}
		}
		out = append(out, s.locate(h, m.recs))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].off < out[j].off })
	return out
}

// predicted34 is rfmt.PredictMisread (§3.4) over simulated records, as
// the scanner runs it over real ones.
func predicted34(b []byte, recs []simRec) map[int64]int64 {
	out := map[int64]int64{}
	for _, r := range recs {
		if off, size, ok := rfmt.PredictMisread(b, r.off, r.total); ok {
			out[off] = size
		}
	}
	return out
}

// offByNineHazards is hazards.go offByNine: the first window v in
// [R−8, R−1] that generation 2 (gaps) and generation 3 (gaps and
// rejected records) test byte by byte.
func (s *sim) offByNineHazards(recs []simRec) []simHazard {
	n := len(s.b)
	type region struct {
		from, to int
		gap      bool
	}
	var regs []region
	for _, g := range s.gaps {
		if g.fill != FillDummy {
			regs = append(regs, region{int(g.Offset), int(g.Offset + g.Length), true})
		}
	}
	if t := s.tail(recs); t < n {
		regs = append(regs, region{t, n, true})
	}
	for _, r := range recs {
		if r.status == rscan.StatusUnreferenced || r.status == rscan.StatusDuplicate {
			regs = append(regs, region{int(r.off) + 1, int(r.end()), false})
		}
	}
	sort.Slice(regs, func(i, j int) bool { return regs[i].from < regs[j].from })
	p2, p3 := -1, -1
	for _, g := range regs {
		for p := g.from; p < g.to && (p2 < 0 || p3 < 0); p++ {
			z := bytes.IndexByte(s.b[p:g.to], 0)
			if z < 0 {
				break
			}
			p += z
			if n-p < 8 {
				continue
			}
			if v, r := binary.BigEndian.Uint64(s.b[p:]), uint64(n-p); !(v < r && v+8 >= r) {
				continue
			}
			if p3 < 0 {
				p3 = p
			}
			if g.gap && p2 < 0 {
				p2 = p
			}
		}
	}
	var out []simHazard
	emit := func(p int, gen2, gen3 bool) {
		if !(gen2 && s.sc.obn2) && !(gen3 && s.sc.obn3) {
			return
		}
		h := simHazard{code: rscan.CodeOffByNine, off: int64(p), versions: rscan.VersionsGen3Unfixed, gap: s.gapAt(int64(p))}
		if gen2 {
			h.versions = rscan.VersionsGen2
		}
		for _, r := range recs {
			if r.off > int64(p) && (gen2 || r.live()) {
				h.victims = append(h.victims, r)
			}
		}
		if len(h.victims) > 0 {
			out = append(out, s.locate(h, recs))
		}
	}
	if p3 >= 0 && p3 == p2 {
		emit(p3, true, true)
	} else {
		if p3 >= 0 {
			emit(p3, false, true)
		}
		if p2 >= 0 {
			emit(p2, true, false)
		}
	}
	return out
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
