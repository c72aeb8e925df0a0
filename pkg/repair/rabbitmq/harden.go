package rabbitmq

// PlanHarden (§7b of rabbitmq-format.md): rewrite the gaps of .rdq files
// in which a RabbitMQ scanner generation misreads (zero-hole misread of
// 3.13.1–4.0.2, off-by-nine windows of 3.13.1–4.1.4, the generation-1
// stop of ≤3.13.0) into bytes no generation misreads: an unreferenced
// dummy record covering the whole gap (gaps ≥ 31 bytes) or 0xFF filler.
// Only gap bytes change; no live record moves, so msg_store_index.ets
// and file_summary.ets stay valid and clean.dot is kept.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/storectl/storectl/pkg/repair"
	"github.com/storectl/storectl/pkg/scan"
	rscan "github.com/storectl/storectl/pkg/scan/rabbitmq"
)

// Fill kinds of a HoleReport.
const (
	FillDummy = "dummy-record" // <<Size:64, Id:16, 0x83, 0x6D, Len:32, 0:Len/unit:8, 0xFF>>
	FillFF    = "0xff-filler"  // every byte 0xFF
	FillNone  = "none"         // no rewrite helps (reported, not planned)
)

// HardenReport explains a harden plan.
type HardenReport struct {
	Root          string       `json:"root"`
	BrokerVersion string       `json:"broker_version"` // "" = every scanner generation
	Holes         []HoleReport `json:"holes"`
	Notes         []string     `json:"notes,omitempty"`
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

// hardenCodes are the hazards harden fixes when they lie in a gap.
var hardenCodes = map[string]bool{rscan.CodeZeroHoleMisread: true, rscan.CodeOffByNine: true, rscan.CodeGen1Stop: true}

// PlanHarden plans, for every vhost of cfg, write-range actions over the
// gaps of msg_store_persistent .rdq files that hold a misread hazard of
// cfg.BrokerVersion (every generation when empty). Each gap gets the
// first rewrite (dummy record, then 0xFF filler) after which the models
// of all three scanner generations lose no more records than before and
// fewer or as many as with the other choices; a gap no rewrite helps is
// reported with FillNone. Hazards inside records (a cascade inside a
// victim, or an off-by-nine window inside an unreferenced record) are
// reported in Notes: harden never rewrites a record.
func PlanHarden(ctx context.Context, cfg rscan.Config) (*repair.Plan, *HardenReport, error) {
	cfg, err := vhostConfig(cfg)
	if err != nil {
		return nil, nil, err
	}
	root, err := filepath.Abs(cfg.Root)
	if err != nil {
		return nil, nil, err
	}
	plan, err := repair.NewPlan(root, "", time.Now())
	if err != nil {
		return nil, nil, err
	}
	rep := &HardenReport{Root: root, BrokerVersion: cfg.BrokerVersion, Holes: []HoleReport{}}
	for _, d := range cfg.VHostDirs {
		if err := ctx.Err(); err != nil {
			return nil, nil, err
		}
		d, err := filepath.Abs(d)
		if err != nil {
			return nil, nil, err
		}
		v, err := rscan.ScanVHost(ctx, root, d, rscan.VHostOptions{BrokerVersion: cfg.BrokerVersion})
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", scan.Rel(root, d), err)
		}
		if err := hardenVHost(plan, rep, v); err != nil {
			return nil, nil, err
		}
	}
	return plan, rep, nil
}

// vhostConfig resolves cfg.Root to vhost dirs when none are given.
func vhostConfig(cfg rscan.Config) (rscan.Config, error) {
	if len(cfg.VHostDirs) > 0 {
		return cfg, nil
	}
	if len(cfg.StoreDirs) > 0 || len(cfg.Files) > 0 || cfg.Root == "" {
		return cfg, ErrNoVHost
	}
	tg, err := scan.Detect(cfg.Root, scan.RabbitMQ)
	if err != nil {
		return cfg, err
	}
	if len(tg.VHostDirs) == 0 {
		return cfg, fmt.Errorf("%w: %s is a %s", ErrNoVHost, cfg.Root, tg.Kind)
	}
	cfg.Root, cfg.VHostDirs = tg.Root, tg.VHostDirs
	return cfg, nil
}

// gapHazards groups the affecting hazard findings of one file by gap.
type gapHazards struct {
	gap      rscan.Gap
	codes    []string
	versions []string
	protects []string
}

func hardenVHost(plan *repair.Plan, rep *HardenReport, v *rscan.VHostScan) error {
	byPath := map[string]*rscan.FileScan{}
	for _, f := range v.Files {
		if !f.Transient {
			byPath[f.Path] = f
		}
	}
	groups := map[string]map[int64]*gapHazards{}
	for _, fd := range v.Findings {
		f := byPath[fd.Path]
		if !hardenCodes[fd.Code] || fd.Severity == scan.Info || f == nil {
			continue
		}
		if f.Err != nil {
			return fmt.Errorf("%s: refusing to plan from an incomplete scan: %w", f.Path, f.Err)
		}
		g, ok := gapAt(f, fd.Offset)
		if !ok {
			rep.Notes = append(rep.Notes, fmt.Sprintf("%s: %s at %d lies inside a record, not in a gap; harden rewrites gaps only (it clears once the gap before the record is hardened, or salvage the victims)", fd.Path, fd.Code, fd.Offset))
			continue
		}
		if g.Offset+g.Length >= f.Size {
			continue // the tail after the last record: nothing follows it to protect
		}
		m := groups[f.Path]
		if m == nil {
			m = map[int64]*gapHazards{}
			groups[f.Path] = m
		}
		gh := m[g.Offset]
		if gh == nil {
			gh = &gapHazards{gap: g}
			m[g.Offset] = gh
		}
		gh.codes = appendNew(gh.codes, fd.Code)
		gh.versions = appendNew(gh.versions, fmt.Sprint(fd.Details["versions"]))
		vs, _ := fd.Details["victims"].([]rscan.Victim)
		for _, vic := range vs {
			gh.protects = appendNew(gh.protects, fmt.Sprintf("%s@%d", vic.MsgID, vic.Offset))
		}
	}
	paths := make([]string, 0, len(groups))
	for p := range groups {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		f := byPath[p]
		var gaps []*gapHazards
		for _, gh := range groups[p] {
			gaps = append(gaps, gh)
		}
		sort.Slice(gaps, func(i, j int) bool { return gaps[i].gap.Offset < gaps[j].gap.Offset })
		if err := hardenFile(plan, rep, v, f, gaps); err != nil {
			return err
		}
	}
	return nil
}

func appendNew(s []string, x string) []string {
	for _, y := range s {
		if y == x {
			return s
		}
	}
	return append(s, x)
}

// gapAt returns the gap of f holding off.
func gapAt(f *rscan.FileScan, off int64) (rscan.Gap, bool) {
	for _, g := range f.Gaps {
		if off >= g.Offset && off < g.Offset+g.Length {
			return g, true
		}
	}
	return rscan.Gap{}, false
}

func hardenFile(plan *repair.Plan, rep *HardenReport, v *rscan.VHostScan, f *rscan.FileScan, gaps []*gapHazards) error {
	b, err := os.ReadFile(f.Abs)
	if err != nil {
		return err
	}
	if int64(len(b)) != f.Size {
		return fmt.Errorf("%s changed during the scan (%d bytes, scanned %d)", f.Path, len(b), f.Size)
	}
	ev := newEvaluator(b, f, v)
	for i, gh := range gaps {
		g := gh.gap
		hr := HoleReport{Path: f.Path, Offset: g.Offset, Length: g.Length, Zero: g.Zero, Hazards: gh.codes,
			Versions: gh.versions, Protects: gh.protects, Fill: FillNone}
		fill, data, id := ev.choose(g, uint32(i))
		hr.Fill = fill
		if fill == FillNone {
			hr.Why = fmt.Sprintf("neither a dummy record nor 0xFF filler makes the scanner models lose fewer records (they lose %d here); left alone", ev.lost)
			rep.Holes = append(rep.Holes, hr)
			continue
		}
		if fill == FillDummy {
			hr.DummyID = id
			hr.Why = fmt.Sprintf("a %d-byte unreferenced dummy record covers the gap: scanners ≤4.0.2 skip it whole, ≥4.0.3 reject it and step through its zero body; no live record moves", g.Length)
		} else {
			hr.Why = fmt.Sprintf("%d bytes of 0xFF: every window overlapping them decodes to a size larger than the file, so no scanner takes a frame here (generation 1, ≤3.13.0, still stops here as it did before)", g.Length)
		}
		a := repair.Action{Op: repair.OpWriteRange, Path: f.Path, Offset: g.Offset, Length: g.Length, Data: data,
			Reason: gh.codes[0], Lost: repair.Loss{Note: fmt.Sprintf("rewrites a %d-byte gap (%s) with %s; protects %v", g.Length, gapWord(g), fill, gh.protects)}}
		if err := plan.Add(a, repair.SnapshotOptions{}); err != nil {
			return err
		}
		rep.Holes = append(rep.Holes, hr)
	}
	if ev.lost > 0 {
		rep.Notes = append(rep.Notes, fmt.Sprintf("%s: after hardening the scanner models still lose %d record(s) in this file", f.Path, ev.lost))
	}
	return nil
}

func gapWord(g rscan.Gap) string {
	if g.Zero {
		return "zero"
	}
	return "stale bytes"
}
