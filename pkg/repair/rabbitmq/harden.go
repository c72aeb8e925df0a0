package rabbitmq

// PlanHarden (docs/formats/rabbitmq-classic.md §7b): rewrite the gaps of .rdq files
// in which a RabbitMQ scanner generation misreads (zero-hole misread of
// 3.13.1–4.0.2, off-by-nine windows of 3.13.1–4.1.4, the generation-1
// stop of ≤3.13.0) into bytes no generation misreads: an unreferenced
// dummy record covering the whole gap (gaps ≥ 31 bytes) or 0xFF filler.
// Only gap bytes change; no live record moves, so msg_store_index.ets
// and file_summary.ets stay valid and clean.dot is kept.

import (
	"context"
	"encoding/hex"
	"fmt"
	"maps"
	"strings"

	"github.com/storectl/storectl/internal/storefile"
	"github.com/storectl/storectl/pkg/repair"
	"github.com/storectl/storectl/pkg/scan"
	rscan "github.com/storectl/storectl/pkg/scan/rabbitmq"
)

// Fill kinds of a HoleReport.
const (
	FillDummy = "dummy-record" // <<Size:64, Id:16, 0x83, 0x6D, Len:32, 0:Len/unit:8, 0xFF>>
	FillFF    = "0xff-filler"  // every byte 0xFF
	FillSkip  = "skip-frame"   // <<Size:64, 0xFF × Size, 0xFE>>: generation 1 walks over it
	FillNone  = "none"         // no rewrite helps (reported, not planned)
)

// HardenReport explains a harden plan.
type HardenReport struct {
	Root          string       `json:"root"`
	BrokerVersion string       `json:"broker_version"` // "" = every scanner generation
	Holes         []HoleReport `json:"holes"`
	// Unfixed lists every in-scope hazard left after the plan: one that
	// lies inside a record (harden never changes a record) or that no
	// rewrite of its gap removes.
	Unfixed []UnfixedHazard `json:"unfixed"`
	Notes   []string        `json:"notes,omitempty"`
	// Scan is the scan the plan was derived from.
	Scan *scan.Result `json:"-"`
}

// Scanned is the scan the plan was derived from.
func (r *HardenReport) Scanned() *scan.Result { return r.Scan }

// UnfixedHazard is a scanner hazard the plan leaves in place, and why.
type UnfixedHazard struct {
	Path     string `json:"path"`
	Code     string `json:"code"`
	Offset   int64  `json:"offset"`
	Versions string `json:"versions"`
	// Victims names the first rscan.InlineVictims records the hazard
	// loses (msg id @ offset (status)), VictimCount counts them all and
	// LastVictim names the last when there are more: a generation-1 stop
	// loses every later record of its file, and the report does not grow
	// with them (storectl scan --records says of every record which
	// hazard loses it).
	Victims     []string `json:"victims"`
	VictimCount int      `json:"victim_count"`
	LastVictim  string   `json:"last_victim,omitempty"`
	Why         string   `json:"why"`
	all         []string // every victim, with keepLists (tests)
}

// HoleReport is the decision for one gap.
type HoleReport struct {
	Path     string   `json:"path"`
	Offset   int64    `json:"offset"`
	Length   int64    `json:"length"`
	Zero     bool     `json:"zero"`     // every byte was 0x00
	Hazards  []string `json:"hazards"`  // finding codes of the misreads in this gap
	Versions []string `json:"versions"` // RabbitMQ versions that misread here
	// Protects names (msg id, 32 hex @ offset) the first
	// rscan.InlineVictims records, in the order the fixed point met them,
	// that the misreads in this gap would lose; ProtectsCount counts them
	// all and LastProtected names the last met when there are more (a
	// generation-1 stop's victims are every later record of the file).
	Protects      []string `json:"protects"`
	ProtectsCount int      `json:"protects_count"`
	LastProtected string   `json:"last_protected,omitempty"`
	Fill          string   `json:"fill"`               // Fill*
	DummyID       string   `json:"dummy_id,omitempty"` // msg id of the dummy record
	Why           string   `json:"why"`
	all           []string // every protected record in file order, with keepLists (tests)
}

// keepLists makes the reports keep every protected record and victim
// (HoleReport.all, UnfixedHazard.all), for the tests that check them.
var keepLists bool

// PlanHarden plans, for every vhost of cfg, write-range actions over the
// gaps of msg_store_persistent .rdq files in which a scanner generation
// of cfg.BrokerVersion (every generation when empty) misreads. The plan
// is a fixed point: each file is held in memory with the planned rewrites
// applied and every scanner model is re-run on it until no hazard of the
// versions in scope is left (a hazard can hide the next: generation 1
// stops at the first zero word). Each rewrite (an unreferenced dummy
// record, else 0xFF filler) must make no model of any generation lose a
// record it found and must leave fewer in-scope hazards and victims. A
// hazard that only a change to a record would remove, or that no rewrite
// of its gap removes, is listed in HardenReport.Unfixed: harden never
// moves or changes a record.
func PlanHarden(ctx context.Context, cfg rscan.Config) (*repair.Plan, *HardenReport, error) {
	root, plan, err := resolveVHosts(&cfg)
	if err != nil {
		return nil, nil, err
	}
	rep := &HardenReport{Root: root, BrokerVersion: cfg.BrokerVersion, Holes: []HoleReport{}, Unfixed: []UnfixedHazard{}}
	sc := scopeFor(cfg.BrokerVersion)
	rep.Scan = &scan.Result{Store: scan.RabbitMQ}
	for _, d := range cfg.VHostDirs {
		one := cfg
		one.VHostDirs = []string{d}
		if err := hardenVHost(ctx, root, one, plan, rep, sc); err != nil {
			return nil, nil, err
		}
	}
	return plan, rep, nil
}

// hardenVHost plans the one vhost of cfg from the streaming scan: each
// persistent file that is not a gap-free run of records is read and run
// to the fixed point while the scan hands its records over
// (rscan.VHostOptions.EachFile), so no more than one file's records and
// bytes are held at a time. Dummy ids must be used by no record of the
// vhost and no queue reference; the ids carrying the dummy prefix that the
// scan showed are collected as it goes, and if a dummy planned early
// turns out to be used by a later file or a missing reference (only a
// store an earlier harden rewrote can hold such ids), the vhost is planned
// again with every such id known from the start.
func hardenVHost(ctx context.Context, root string, cfg rscan.Config, plan *repair.Plan, rep *HardenReport, sc scope) error {
	known := map[[16]byte]bool{}
	for {
		alloc := &idAlloc{used: maps.Clone(known), planned: map[[16]byte]bool{}}
		seen := map[[16]byte]bool{}
		holes, unfixed := len(rep.Holes), len(rep.Unfixed)
		var acts []repair.Action
		sc0 := scanMark{len(rep.Scan.Files), len(rep.Scan.Findings), len(rep.Scan.Errors), rep.Scan.BytesScanned, rep.Scan.Incomplete}
		var planErr error
		err := eachVHost(ctx, root, cfg, rep.Scan, func(_ *rscan.VHostScan, f *rscan.FileScan) error {
			for _, rec := range f.Records {
				if hasDummyPrefix(rec.MsgID) {
					seen[rec.MsgID], alloc.used[rec.MsgID] = true, true
				}
			}
			if f.Transient || !irregular(f) {
				return nil
			}
			planErr = hardenFile(&acts, rep, f, sc, alloc)
			return planErr
		}, func(_ string, v *rscan.VHostScan) error {
			for _, f := range v.Findings {
				if f.Code == rscan.CodeMessageMissing || f.Code == rscan.CodeMessageUnknown {
					if raw, err := hex.DecodeString(f.MsgID); err == nil && len(raw) == 16 && hasDummyPrefix([16]byte(raw)) {
						seen[[16]byte(raw)] = true
					}
				}
			}
			return nil
		})
		if planErr != nil {
			return planErr
		}
		if err != nil {
			return err
		}
		clash := false
		for id := range alloc.planned {
			clash = clash || seen[id]
		}
		if !clash || len(seen) == len(known) {
			for _, a := range acts {
				if err := plan.Add(a, repair.SnapshotOptions{}); err != nil {
					return err
				}
			}
			return nil
		}
		known = seen
		rep.Holes, rep.Unfixed = rep.Holes[:holes], rep.Unfixed[:unfixed]
		sc0.restore(rep.Scan) // the vhost's files and findings are added again
	}
}

// scanMark is how far a scan result was filled, to go back to.
type scanMark struct {
	files, findings, errors int
	bytes                   int64
	incomplete              bool
}

func (m scanMark) restore(r *scan.Result) {
	r.Files, r.Findings, r.Errors = r.Files[:m.files], r.Findings[:m.findings], r.Errors[:m.errors]
	r.BytesScanned, r.Incomplete = m.bytes, m.incomplete
}

// hardenFile runs the fixed point on the persistent file f (as the scan
// hands it over) and plans the gap rewrites it settled on.
func hardenFile(acts *[]repair.Action, rep *HardenReport, f *rscan.FileScan, sc scope, alloc *idAlloc) error {
	if f.Err != nil {
		return fmt.Errorf("%s: refusing to plan from an incomplete scan: %w", f.Path, f.Err)
	}
	b, err := storefile.ReadFile(f.Abs)
	if err != nil {
		return err
	}
	if int64(len(b)) != f.Size {
		return fmt.Errorf("%s changed during the scan (%d bytes, scanned %d)", f.Path, len(b), f.Size)
	}
	s := newSim(f, b, sc)
	left, rounds := s.fix(alloc)
	for _, g := range s.gaps {
		planGap(acts, rep, s, g)
	}
	for _, h := range left {
		rep.Unfixed = append(rep.Unfixed, s.unfixed(h, rounds))
	}
	return nil
}

// irregular reports whether a scanner model can misread f: it has gaps,
// or records a validating scanner walks through byte by byte.
func irregular(f *rscan.FileScan) bool {
	if f.Err != nil || len(f.Gaps) > 0 || len(f.BadMarkers) > 0 {
		return true
	}
	for _, r := range f.Records {
		if r.Status == rscan.StatusUnreferenced || r.Status == rscan.StatusDuplicate {
			return true
		}
	}
	return false
}

// planGap adds the write-range action (to acts, for the plan) and the
// report of one gap the fixed point rewrote, or the report of a stuck gap
// it left alone.
func planGap(acts *[]repair.Action, rep *HardenReport, s *sim, g *simGap) {
	if g.fill == "" && len(g.codes) == 0 {
		return
	}
	hr := HoleReport{Path: s.path, Offset: g.Offset, Length: g.Length, Zero: g.Zero, Hazards: g.codes,
		Versions: g.versions, Protects: []string{}, ProtectsCount: g.prot.n, Fill: FillNone}
	for _, v := range g.prot.head {
		hr.Protects = append(hr.Protects, recName(v))
	}
	if g.prot.n > len(g.prot.head) {
		hr.LastProtected = recName(g.prot.last)
	}
	if keepLists {
		g.prot.each(s.orig, func(v simRec) { hr.all = append(hr.all, recName(v)) })
	}
	switch g.fill {
	case "":
		hr.Why = "no rewrite (dummy record, 0xFF filler, skip frame) removes the hazard without another scanner model losing a record; left alone (see unfixed)"
		rep.Holes = append(rep.Holes, hr)
		return
	case FillDummy:
		hr.Fill, hr.DummyID = FillDummy, hexID(g.id)
		hr.Why = fmt.Sprintf("a %d-byte unreferenced dummy record covers the gap: scanners ≤4.0.2 skip it whole, ≥4.0.3 reject it and step through its zero body; no live record moves", g.Length)
	case FillSkip:
		hr.Fill = FillSkip
		hr.Why = fmt.Sprintf("a %d-byte frame whose marker is not 0xFF: generation 1 (≤3.13.0) steps over it without taking it, generations 2 and 3 find no frame in it (checked on the models); too short for a dummy record", g.Length)
	default:
		hr.Fill = FillFF
		hr.Why = fmt.Sprintf("%d bytes of 0xFF: every window overlapping them decodes to a size larger than the file, so no scanner takes a frame here", g.Length)
	}
	data := append([]byte(nil), s.b[g.Offset:g.Offset+g.Length]...)
	a := repair.Action{Op: repair.OpWriteRange, Path: s.path, Offset: g.Offset, Length: g.Length, Data: data,
		Reason: g.codes[0], Lost: repair.Loss{Note: fmt.Sprintf("rewrites a %d-byte gap (%s) with %s; protects %s", g.Length, gapWord(g.Gap), hr.Fill, protectsNote(&hr))}}
	*acts = append(*acts, a)
	rep.Holes = append(rep.Holes, hr)
}

// protectsNote names the records a rewrite protects: as %v does for up
// to rscan.InlineVictims of them, else the first ones, the last and the
// count, so that an action's note does not grow with the records.
func protectsNote(hr *HoleReport) string {
	if hr.ProtectsCount <= len(hr.Protects) {
		return fmt.Sprint(hr.Protects)
	}
	return fmt.Sprintf("[%s ... %s] (%d records)", strings.Join(hr.Protects[:len(hr.Protects)-1], " "), hr.LastProtected, hr.ProtectsCount)
}

func gapWord(g rscan.Gap) string {
	if g.Zero {
		return "zero"
	}
	return "stale bytes"
}
