// Package rabbitmq plans repairs of a RabbitMQ node's shared message
// stores as repair.Plans (format: docs/formats/rabbitmq-classic.md,
// whose section numbers the comments cite).
// Planning only reads the data dir; pkg/repair.Apply performs the writes.
//
// PlanTruncate cuts the torn tail of each vhost's current .rdq file, as
// the broker does at its next start, but at the end of the last record
// the evidence-based scan (pkg/scan/rabbitmq) found rather than where the
// broker's own scanner happens to stop.
package rabbitmq

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"

	"github.com/storectl/storectl/pkg/repair"
	"github.com/storectl/storectl/pkg/scan"
	rscan "github.com/storectl/storectl/pkg/scan/rabbitmq"
)

// Decisions for one .rdq file in a TruncateReport.
const (
	DecisionCut        = "cut"         // the current file: cut at the end of its last record
	DecisionReportOnly = "report-only" // not the current file: left alone
)

// ErrNoVHost is returned when the configuration names no vhost dir (a bare
// message store dir or single .rdq files): which records are referenced,
// and which file is current, then cannot be told.
var ErrNoVHost = errors.New("rabbitmq truncate needs a node or vhost dir")

// TruncateReport explains a RabbitMQ truncate plan, vhost by vhost.
type TruncateReport struct {
	Root   string        `json:"root"`
	VHosts []VHostReport `json:"vhosts"`
	// Scan is the scan the plan was derived from.
	Scan *scan.Result `json:"-"`
}

// Scanned is the scan the plan was derived from.
func (r *TruncateReport) Scanned() *scan.Result { return r.Scan }

// VHostReport is what the plan does in one vhost.
type VHostReport struct {
	Dir   string `json:"dir"` // relative to the data dir
	VHost string `json:"vhost"`
	// CleanShutdown is true when clean.dot is present: the next start would
	// trust file_summary.ets and msg_store_index.ets without a scan.
	CleanShutdown bool `json:"clean_shutdown"`
	// RemovesCleanDot is true when the plan moves clean.dot to the backup
	// (it changes a file the saved state describes), so the next start
	// rebuilds the index from the files.
	RemovesCleanDot bool         `json:"removes_clean_dot"`
	Files           []FileReport `json:"files"` // persistent files with bytes after their last record
	Notes           []string     `json:"notes,omitempty"`
}

// FileReport is the decision for one .rdq file with a tail.
type FileReport struct {
	Path     string `json:"path"`
	Size     int64  `json:"size"`
	ValidEnd int64  `json:"valid_end"` // end of the last record the evidence scan found
	End      string `json:"end"`       // torn | garbage | zero
	Current  bool   `json:"current"`
	Decision string `json:"decision"` // DecisionCut or DecisionReportOnly
	Why      string `json:"why"`
	// BrokerCutsTo is where a dirty start of the broker truncates the
	// current file: the end of its last referenced record (unreferenced
	// records after it are garbage to the broker). -1 when unknown.
	BrokerCutsTo int64 `json:"broker_cuts_to"`
}

// PlanTruncate plans, for every vhost of cfg, a truncate-file of the
// current (highest-numbered) msg_store_persistent .rdq at the end of its
// last valid record when bytes follow it (a torn record, garbage or a
// zero fill), and, when that vhost shut down cleanly, the removal of
// clean.dot so the next start rebuilds its index instead of trusting a
// saved state the cut made stale. Other files with such tails are only
// reported: their records are never cut. msg_store_transient is ignored
// (the broker wipes it at start). With no VHostDirs, cfg.Root is detected
// as a node or vhost dir. A store with nothing to cut gives an empty plan.
func PlanTruncate(ctx context.Context, cfg rscan.Config) (*repair.Plan, *TruncateReport, error) {
	root, plan, err := resolveVHosts(&cfg)
	if err != nil {
		return nil, nil, err
	}
	rep := &TruncateReport{Root: root}
	rep.Scan = &scan.Result{Store: scan.RabbitMQ}
	tails := map[*rscan.FileScan]fileTail{}
	err = eachVHost(ctx, root, cfg, rep.Scan, func(_ *rscan.VHostScan, f *rscan.FileScan) error {
		if !f.Transient && f.ValidEnd < f.Size {
			tails[f] = tailOf(f)
		}
		return nil
	}, func(_ string, v *rscan.VHostScan) error {
		vr, err := planVHost(root, plan, v, tails)
		rep.VHosts = append(rep.VHosts, vr)
		clear(tails)
		return err
	})
	if err != nil {
		return nil, nil, err
	}
	return plan, rep, nil
}

// fileTail is what the plan needs of the records of a file with bytes
// after its last record, taken while the scan hands them over: the first
// record that ends past the valid end (-1: none, as it must be) and the
// frames without the write marker in the tail.
type fileTail struct {
	pastEnd int64
	bad     int64
}

func tailOf(f *rscan.FileScan) fileTail {
	t := fileTail{pastEnd: -1}
	for _, r := range f.Records {
		if r.End() > f.ValidEnd {
			t.pastEnd = r.Offset
			break
		}
	}
	for _, off := range f.BadMarkers {
		if off >= f.ValidEnd {
			t.bad++
		}
	}
	return t
}

// planVHost adds the actions of one scanned vhost to plan; tails holds
// what its files with a tail had in their records.
func planVHost(root string, plan *repair.Plan, v *rscan.VHostScan, tails map[*rscan.FileScan]fileTail) (VHostReport, error) {
	vr := VHostReport{Dir: v.Dir, VHost: v.VHost, CleanShutdown: v.Clean != nil && v.Clean.CleanDot}
	cut := false
	for _, f := range v.Files {
		if f.Transient {
			continue
		}
		if f.Err != nil {
			return vr, fmt.Errorf("%s: refusing to plan from an incomplete scan: %w", f.Path, f.Err)
		}
		if f.ValidEnd >= f.Size {
			continue
		}
		tail := tails[f]
		if tail.pastEnd >= 0 {
			return vr, fmt.Errorf("%s: record at %d ends past the scan's valid end %d; refusing to cut", f.Path, tail.pastEnd, f.ValidEnd)
		}
		fr := FileReport{Path: f.Path, Size: f.Size, ValidEnd: f.ValidEnd, End: f.End, Current: f.Current, BrokerCutsTo: -1}
		if !f.Current {
			fr.Decision = DecisionReportOnly
			fr.Why = fmt.Sprintf("%d bytes after the last record, but this is not the current write file: the broker never truncates it and its records are kept; nothing is cut", f.Size-f.ValidEnd)
			vr.Files = append(vr.Files, fr)
			continue
		}
		a, err := cutAction(root, v, f, tail.bad)
		if err != nil {
			return vr, err
		}
		if err := plan.Add(a, repair.SnapshotOptions{}); err != nil {
			return vr, err
		}
		cut = true
		fr.Decision = DecisionCut
		fr.Why = fmt.Sprintf("current write file: %s (%s); cut at the end of the last record the evidence scan found, as the broker cuts its current file at start (a dirty start then also drops unreferenced records after the last referenced one)", a.Lost.Note, a.Reason)
		if v.Queues != nil {
			fr.BrokerCutsTo = f.LastReferencedEnd
		}
		vr.Files = append(vr.Files, fr)
	}
	if cut && vr.CleanShutdown {
		rel := filepath.Join(filepath.FromSlash(v.Dir), "msg_store_persistent", "clean.dot")
		a := repair.Action{Op: repair.OpRemoveFile, Path: rel, Reason: rscan.CodeCleanStateStale,
			Lost: repair.Loss{Note: "clean-shutdown marker: file_summary.ets holds the current file's old size, so the next start must rebuild the message index by scanning the files (dirty recovery; 4.0.0+ then keeps one extra reference per message, rabbitmq-server PR #17351)"}}
		if err := plan.Add(a, repair.SnapshotOptions{}); err != nil {
			return vr, err
		}
		vr.RemovesCleanDot = true
		vr.Notes = append(vr.Notes, "clean.dot is moved to the backup: the saved index and file summary describe the file before the cut, so the next start rebuilds them (\"rebuilding indices from scratch\")")
	}
	return vr, nil
}
