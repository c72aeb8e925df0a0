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
	"fmt"

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
	Path     string   `json:"path"`
	Code     string   `json:"code"`
	Offset   int64    `json:"offset"`
	Versions string   `json:"versions"`
	Victims  []string `json:"victims"` // msg id @ offset (status)
	Why      string   `json:"why"`
}

// HoleReport is the decision for one gap.
type HoleReport struct {
	Path     string   `json:"path"`
	Offset   int64    `json:"offset"`
	Length   int64    `json:"length"`
	Zero     bool     `json:"zero"`     // every byte was 0x00
	Hazards  []string `json:"hazards"`  // finding codes of the misreads in this gap
	Versions []string `json:"versions"` // RabbitMQ versions that misread here
	// Protects lists the msg ids (32 hex @ offset) of the records the
	// misreads in this gap would lose.
	Protects []string `json:"protects"`
	Fill     string   `json:"fill"`               // Fill*
	DummyID  string   `json:"dummy_id,omitempty"` // msg id of the dummy record
	Why      string   `json:"why"`
}

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
	err = eachVHost(ctx, root, cfg, rep.Scan, nil, func(_ string, v *rscan.VHostScan) error { return hardenVHost(plan, rep, v, sc) })
	if err != nil {
		return nil, nil, err
	}
	return plan, rep, nil
}

// hardenVHost runs the fixed point on every persistent file of v that is
// not a gap-free run of records and plans the gap rewrites it settled on.
func hardenVHost(plan *repair.Plan, rep *HardenReport, v *rscan.VHostScan, sc scope) error {
	alloc := newIDAlloc(v)
	for _, f := range v.Files {
		if f.Transient || !irregular(f) {
			continue
		}
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
			if err := planGap(plan, rep, s, g); err != nil {
				return err
			}
		}
		for _, h := range left {
			rep.Unfixed = append(rep.Unfixed, s.unfixed(h, rounds))
		}
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

// planGap adds the write-range action and the report of one gap the fixed
// point rewrote, or the report of a stuck gap it left alone.
func planGap(plan *repair.Plan, rep *HardenReport, s *sim, g *simGap) error {
	if g.fill == "" && len(g.codes) == 0 {
		return nil
	}
	hr := HoleReport{Path: s.path, Offset: g.Offset, Length: g.Length, Zero: g.Zero, Hazards: g.codes,
		Versions: g.versions, Protects: g.protects, Fill: FillNone}
	if hr.Protects == nil {
		hr.Protects = []string{}
	}
	switch g.fill {
	case "":
		hr.Why = "no rewrite (dummy record, 0xFF filler, skip frame) removes the hazard without another scanner model losing a record; left alone (see unfixed)"
		rep.Holes = append(rep.Holes, hr)
		return nil
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
		Reason: g.codes[0], Lost: repair.Loss{Note: fmt.Sprintf("rewrites a %d-byte gap (%s) with %s; protects %v", g.Length, gapWord(g.Gap), hr.Fill, g.protects)}}
	if err := plan.Add(a, repair.SnapshotOptions{}); err != nil {
		return err
	}
	rep.Holes = append(rep.Holes, hr)
	return nil
}

func gapWord(g rscan.Gap) string {
	if g.Zero {
		return "zero"
	}
	return "stale bytes"
}
