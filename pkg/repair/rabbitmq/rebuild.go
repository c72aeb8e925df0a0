package rabbitmq

// rebuild-index for RabbitMQ: regenerate msg_store_index.ets and
// file_summary.ets of each vhost's msg_store_persistent from the
// evidence-based scan and the queue indexes' reference counts, so that a
// node that shut down cleanly but whose saved index no longer matches its
// files (a damaged or missing .ets) starts clean instead of "rebuilding
// indices from scratch" (rabbitmq-server #2324).

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/storectl/storectl/pkg/repair"
	"github.com/storectl/storectl/pkg/scan"
	rscan "github.com/storectl/storectl/pkg/scan/rabbitmq"
)

// States of a vhost's store in a RebuildReport.
const (
	// RebuildClean: clean.dot is present and consistent; the .ets files
	// are rebuilt when they differ from the files.
	RebuildClean = "clean"
	// RebuildUnclean: clean.dot is absent; the broker rebuilds the index by
	// scanning at its next start anyway, so nothing is written.
	RebuildUnclean = "unclean"
	// RebuildInconsistent: clean.dot is present but cannot be trusted; the
	// plan removes it instead of writing .ets files.
	RebuildInconsistent = "inconsistent"
)

// Names of the files of a persistent store dir the rebuild reads or writes.
const (
	rbStoreDir    = "msg_store_persistent"
	rbIndexFile   = "msg_store_index.ets"
	rbSummaryFile = "file_summary.ets"
	rbCleanDot    = "clean.dot"
)

// rbMaxSmallFile bounds clean.dot and each .ets read whole: one index
// object is about 60 bytes, so 1 GiB covers ~17 million messages, beyond
// any store this tool is meant for (the scanner's own .ets limit).
const rbMaxSmallFile = 1 << 30

// RebuildReport explains a RabbitMQ rebuild-index plan, vhost by vhost.
type RebuildReport struct {
	Root string `json:"root"`
	// StageDir holds the rebuilt files the plan's replace-file actions
	// point at; empty when the plan has none. It is beside the data dir,
	// never inside it; RemoveStage removes it.
	StageDir string         `json:"stage_dir,omitempty"`
	VHosts   []RebuildVHost `json:"vhosts"`
	// Scan is the scan the plan was derived from.
	Scan *scan.Result `json:"-"`
}

// Scanned is the scan the plan was derived from.
func (r *RebuildReport) Scanned() *scan.Result { return r.Scan }

// RebuildVHost is what the plan does in one vhost's persistent store.
type RebuildVHost struct {
	Dir   string `json:"dir"` // vhost dir, relative to the data dir
	VHost string `json:"vhost"`
	State string `json:"state"` // RebuildClean, RebuildUnclean or RebuildInconsistent
	Why   string `json:"why"`   // one sentence on State
	// ClientRefs is the number of client refs in clean.dot; QueueDirs the
	// queue index dirs; QueuesWithRefs those holding shared-store refs.
	ClientRefs     int          `json:"client_refs"`
	QueueDirs      int          `json:"queue_dirs"`
	QueuesWithRefs int          `json:"queues_with_refs"`
	Index          RebuildTable `json:"index"`
	Summary        RebuildTable `json:"file_summary"`
	Notes          []string     `json:"notes,omitempty"`
}

// RebuildTable compares one rebuilt table with the file on disk.
type RebuildTable struct {
	Path    string `json:"path"`    // relative to the data dir
	Objects int    `json:"objects"` // objects of the rebuilt table
	Live    int    `json:"live"`    // index: entries with RefCount > 0
	// Existing is "absent", "unreadable", "equal" or "differs".
	Existing string `json:"existing"`
	Detail   string `json:"detail,omitempty"` // why unreadable, or what differs
	Added    int    `json:"added"`            // objects only in the rebuilt table
	Removed  int    `json:"removed"`          // objects only in the file on disk
	Changed  int    `json:"changed"`          // same key, other value
	Action   string `json:"action,omitempty"` // the action ID that replaces it
}

// PlanRebuildIndex plans, for every vhost of cfg, the replacement of
// msg_store_persistent/msg_store_index.ets and file_summary.ets by tables
// rebuilt from the files: one index entry per msg id the evidence scan
// found (first copy), with the number of references from the queue
// indexes (0 for records no queue references, as the broker keeps them
// until compaction), and one summary per .rdq. It does so only when
// clean.dot is present and consistent; when clean.dot is absent the plan
// is empty (the broker rebuilds by scanning anyway), and when it is
// inconsistent the plan removes clean.dot instead. Tables equal (as sets)
// to the files on disk are left alone. The rebuilt files are staged beside
// the data dir (RebuildReport.StageDir), never inside it.
func PlanRebuildIndex(ctx context.Context, cfg rscan.Config) (*repair.Plan, *RebuildReport, error) {
	root, plan, err := resolveVHosts(&cfg)
	if err != nil {
		return nil, nil, err
	}
	rep := &RebuildReport{Root: root}
	st := &rbStage{root: root}
	ok := false
	defer func() {
		if !ok {
			st.remove()
		}
	}()
	rep.Scan = &scan.Result{Store: scan.RabbitMQ}
	col := &rbCollect{}
	err = eachVHost(ctx, root, cfg, rep.Scan, col.file, func(d string, v *rscan.VHostScan) error {
		vr, err := rbPlanVHost(root, d, cfg.BrokerVersion, plan, st, v, col)
		*col = rbCollect{}
		if err != nil {
			return fmt.Errorf("%s: %w", v.Dir, err)
		}
		rep.VHosts = append(rep.VHosts, vr)
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	ok = true
	if st.dir != "" {
		hasSource := false
		for _, a := range plan.Actions {
			hasSource = hasSource || a.Source != ""
		}
		if hasSource {
			rep.StageDir = st.dir
		} else {
			st.remove()
		}
	}
	return plan, rep, nil
}

// RemoveStage removes the stage dir the plan's replace-file actions point
// at (after Apply, or when the plan is abandoned).
func (r *RebuildReport) RemoveStage() error {
	if r == nil {
		return nil
	}
	return repair.RemoveStage(&r.StageDir)
}

// rbStage is the staging dir beside the data dir, made on first use.
type rbStage struct {
	root string
	dir  string
}

// file returns a fresh path in the stage for a vhost's table.
func (s *rbStage) file(vhostDir, name string) (string, error) {
	if s.dir == "" {
		dir, err := repair.NewStageDir(s.root)
		if err != nil {
			return "", err
		}
		s.dir = dir
	}
	d := filepath.Join(s.dir, filepath.Base(vhostDir))
	if err := os.MkdirAll(d, 0o700); err != nil {
		return "", err
	}
	return filepath.Join(d, name), nil
}

// remove removes the stage dir, if one was made (repair.RemoveStage).
func (s *rbStage) remove() { _ = repair.RemoveStage(&s.dir) }

// rbPlanVHost decides on one scanned vhost and adds its actions.
func rbPlanVHost(root, vhostDir, brokerVersion string, plan *repair.Plan, st *rbStage, v *rscan.VHostScan, col *rbCollect) (RebuildVHost, error) {
	store := filepath.Join(filepath.FromSlash(v.Dir), rbStoreDir)
	vr := RebuildVHost{Dir: v.Dir, VHost: v.VHost,
		Index:   RebuildTable{Path: filepath.ToSlash(filepath.Join(store, rbIndexFile))},
		Summary: RebuildTable{Path: filepath.ToSlash(filepath.Join(store, rbSummaryFile))}}
	for _, f := range v.Files {
		if !f.Transient && f.Err != nil {
			return vr, fmt.Errorf("%s: refusing to rebuild from an incomplete scan: %w", f.Path, f.Err)
		}
	}
	if v.Queues != nil {
		vr.QueueDirs = len(v.Queues.Queues)
		for _, q := range v.Queues.Queues {
			if q.HasRefs() {
				vr.QueuesWithRefs++
			}
		}
	}
	if v.Clean == nil || !v.Clean.CleanDot {
		vr.State = RebuildUnclean
		vr.Why = "clean.dot is absent: the broker will rebuild its index by scanning the files at the next start (dirty recovery) and ignores any .ets files, so none are written (if storectl truncate moved clean.dot to its backup, that was on purpose)"
		return vr, nil
	}
	why, err := rbCheckMarkers(filepath.Join(root, store), v, &vr)
	if err != nil {
		return vr, err
	}
	if why != "" {
		vr.State, vr.Why = RebuildInconsistent, why
		a := repair.Action{Op: repair.OpRemoveFile, Path: filepath.Join(store, rbCleanDot), Reason: rscan.CodeCleanMarkersInconsistent,
			Lost: repair.Loss{Note: "clean-shutdown marker: " + why + "; without it the next start rebuilds the index from the queue indexes and the files (dirty recovery; 4.0.0+ then keeps one extra reference per message, rabbitmq-server PR #17351)"}}
		if err := plan.Add(a, repair.SnapshotOptions{}); err != nil {
			return vr, err
		}
		return vr, nil
	}
	vr.State = RebuildClean
	vr.Why = fmt.Sprintf("clean.dot is present and consistent (%d client refs; %d queue dirs, %d holding shared-store references; every referenced message is in a file)",
		vr.ClientRefs, vr.QueueDirs, vr.QueuesWithRefs)
	vr.Notes = append(vr.Notes, "recovery.dets (the queues' recovery terms, whose persistent_ref values the broker matches against client_refs) is opaque DETS and is not checked: if it does not match, the broker does a dirty recovery and ignores the rebuilt files, which is safe")
	b, err := rbBuild(root, vhostDir, brokerVersion, v, col)
	if err != nil {
		return vr, err
	}
	vr.Notes = append(vr.Notes, b.notes...)
	if err := rbPlanTable(plan, st, vhostDir, &vr.Index, b.index, rscan.CodeIndexMismatch); err != nil {
		return vr, err
	}
	if err := rbPlanTable(plan, st, vhostDir, &vr.Summary, b.summary, rscan.CodeSummaryMismatch); err != nil {
		return vr, err
	}
	if st.dir != "" && !repair.SameDevice(root, st.dir) {
		vr.Notes = append(vr.Notes, "the stage dir is on another filesystem than the data dir (mount point)")
	}
	return vr, nil
}

// rbPlanTable stages a rebuilt table and plans its replace-file when the
// file on disk differs.
func rbPlanTable(plan *repair.Plan, st *rbStage, vhostDir string, t *RebuildTable, b *rbTable, reason string) error {
	t.Objects, t.Live = b.objects, b.live
	t.Existing, t.Detail = b.existing, b.detail
	t.Added, t.Removed, t.Changed = b.added, b.removed, b.changed
	if t.Existing == "equal" {
		return nil
	}
	name := filepath.Base(filepath.FromSlash(t.Path))
	src, err := st.file(vhostDir, name)
	if err != nil {
		return err
	}
	if err := rbWriteFile(src, b.data); err != nil {
		return err
	}
	note := fmt.Sprintf("%s is %s", name, t.Existing)
	if t.Detail != "" {
		note += " (" + t.Detail + ")"
	}
	note += fmt.Sprintf("; replaced by a table rebuilt from the files: %d objects", t.Objects)
	if t.Existing == "differs" {
		note += fmt.Sprintf(" (%d added, %d removed, %d changed)", t.Added, t.Removed, t.Changed)
	}
	a := repair.Action{Op: repair.OpReplaceFile, Path: filepath.FromSlash(t.Path), Source: src, Reason: reason,
		Lost: repair.Loss{Records: int64(t.Removed + t.Changed), Note: note}}
	if err := plan.Add(a, repair.SnapshotOptions{}); err != nil {
		return err
	}
	t.Action = plan.Actions[len(plan.Actions)-1].ID
	return nil
}

// rbWriteFile writes a staged file and syncs it: Apply renames a copy,
// but the stage must survive until then.
func rbWriteFile(p string, b []byte) error {
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// rbJoin joins non-empty reasons into one sentence.
func rbJoin(parts []string) string { return strings.Join(parts, "; ") }
