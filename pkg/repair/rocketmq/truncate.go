package rocketmq

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/storectl/storectl/pkg/repair"
	"github.com/storectl/storectl/pkg/scan"
	scanrmq "github.com/storectl/storectl/pkg/scan/rocketmq"
)

// Decisions for one commitlog file in a TruncateReport.
const (
	TruncateZeroTail = "zero-tail"     // the end file: bytes from the end zeroed, size kept
	TruncatePad      = "cut-and-pad"   // short end file: partial record zeroed, padded to the mapped size
	TruncateRemove   = "remove"        // later file moved to the backup (the broker deletes it too)
	TruncateKeep     = "keep"          // later all-zero pre-allocated file, left in place
	TruncateClean    = "already-clean" // the end file has only zeros past the end
)

// TruncateMaxLostIDs caps the message ids listed per action, so a plan
// that drops a whole 1 GiB file stays small enough to read; the count in
// Lost.Records is always complete.
const TruncateMaxLostIDs = 1000

// TruncateReport explains a RocketMQ truncate plan: where a correct
// recovery ends and why, and what the plan does to each file.
type TruncateReport struct {
	// RecoveryEnd is the physical offset where a correct recovery (with
	// the rocketmq #10017 offset check) stops.
	RecoveryEnd int64 `json:"recovery_end"`
	// EndPath and EndOffset locate RecoveryEnd: the commitlog file
	// (relative to the data dir) and the offset in it.
	EndPath   string `json:"end_path"`
	EndOffset int64  `json:"end_offset"`
	// Reason is the finding code at the end ("" for a clean end).
	Reason         string `json:"reason,omitempty"`
	MappedFileSize int64  `json:"mapped_file_size"`
	// CommitLog has one entry per commitlog file at or after the end.
	CommitLog []TruncateFile `json:"commitlog"`
	// ConsumeQueues has one entry per consume queue the plan changes.
	ConsumeQueues []TruncateCQ `json:"consume_queues,omitempty"`
	// IndexFiles lists the index files that reference data at or past the
	// end; the plan does not edit them: run rebuild-index.
	IndexFiles []TruncateIndexFile `json:"index_files,omitempty"`
	// Notes are other facts the operator should know.
	Notes []string `json:"notes,omitempty"`
	// Scan is the commitlog scan the plan was derived from.
	Scan *scan.Result `json:"-"`
}

// TruncateFile is the decision for one commitlog file.
type TruncateFile struct {
	Path     string `json:"path"`
	Size     int64  `json:"size"`
	Decision string `json:"decision"` // one of the Truncate* decisions
	Why      string `json:"why"`
}

// TruncateCQ is what the plan does to one consume queue
// (consumequeue/<topic>/<queueId>).
type TruncateCQ struct {
	Dir          string   `json:"dir"` // relative to the data dir
	Topic        string   `json:"topic"`
	QueueID      int      `json:"queue_id"`
	UnitsBefore  int      `json:"units_before"` // valid units a CQ recovery reads now
	UnitsDropped int      `json:"units_dropped"`
	RemovedFiles []string `json:"removed_files,omitempty"`
}

// TruncateIndexFile is an index file holding entries at or past the end.
type TruncateIndexFile struct {
	Path          string `json:"path"`
	EndPhyOffset  int64  `json:"end_phy_offset"` // from the header
	Entries       int64  `json:"entries"`        // entries in use (indexCount - 1)
	EntriesBeyond int64  `json:"entries_beyond"` // entries with phy offset >= the recovery end
	Hint          string `json:"hint"`
}

// PlanTruncate plans what a correct RocketMQ recovery does, made durable:
// at the recovery end it zero-fills the rest of that commitlog file (the
// broker only moves its write position, so the stale bytes would come
// back: rocketmq #10017), moves later commitlog files that hold data to
// the backup (an all-zero pre-allocated file stays: the broker deletes it
// itself and would re-create it), cuts a short last file at its last
// whole record and pads it back to the mapped size, and drops the consume
// queue units that point at or past the end as
// ConsumeQueue.truncateDirtyLogicFiles does. Index files referencing the
// end are listed in the report, not edited. It only reads: the plan is
// for repair.Apply. A store a correct recovery keeps whole gives an empty
// plan. cfg.Root is the data dir and must contain the commitlog dir.
func PlanTruncate(ctx context.Context, cfg scanrmq.Config) (*repair.Plan, *TruncateReport, error) {
	if cfg.Root == "" {
		return nil, nil, errors.New("rocketmq truncate: no data dir (Config.Root)")
	}
	root, err := filepath.Abs(cfg.Root)
	if err != nil {
		return nil, nil, err
	}
	cfg.Root = root
	if cfg.CommitLogDir == "" {
		cfg.CommitLogDir = filepath.Join(root, "commitlog")
	}
	if cfg.CommitLogDir, err = filepath.Abs(cfg.CommitLogDir); err != nil {
		return nil, nil, err
	}
	if rel, err := filepath.Rel(root, cfg.CommitLogDir); err != nil || !filepath.IsLocal(rel) {
		return nil, nil, fmt.Errorf("rocketmq truncate: commitlog dir %s is not inside the data dir %s", cfg.CommitLogDir, root)
	}
	if len(cfg.Files) > 0 {
		return nil, nil, errors.New("rocketmq truncate: works on a whole store, not on single files")
	}
	cfg.OnMessage = nil
	res, err := scanrmq.ScanCommitLog(ctx, cfg, scan.Options{})
	if err != nil {
		return nil, nil, err
	}
	if res.Incomplete {
		return nil, nil, fmt.Errorf("rocketmq truncate: the commitlog scan is incomplete, refusing to plan from it: %v", res.Errors)
	}
	if u, ok := res.EndUnknown(); ok && res.RecoveryEnd == nil {
		why := u.Missing
		if why == "" {
			why = u.WaitsOn + " could not be read in full"
		}
		return nil, nil, fmt.Errorf("rocketmq truncate: the recovery end is not known (%s; it is at least %d), refusing to plan a cut", why, u.AtLeast)
	}
	if res.RecoveryEnd == nil || len(res.Files) == 0 {
		return nil, nil, errors.New("rocketmq truncate: no commitlog files")
	}
	st, err := scanrmq.OpenStore(cfg)
	if err != nil {
		return nil, nil, err
	}
	defer st.Close()
	plan, err := repair.NewPlan(root, "", time.Now())
	if err != nil {
		return nil, nil, err
	}
	t := &trPlanner{ctx: ctx, root: root, res: res, st: st, plan: plan, end: *res.RecoveryEnd, mapped: st.MappedFileSize()}
	t.rep = &TruncateReport{RecoveryEnd: t.end, MappedFileSize: t.mapped, Scan: res}
	for _, step := range []func() error{t.commitLog, t.consumeQueues, t.indexFiles} {
		if err := step(); err != nil {
			return nil, nil, err
		}
		if err := ctx.Err(); err != nil {
			return nil, nil, err
		}
	}
	return plan, t.rep, nil
}

// trPlanner carries the state of one PlanTruncate.
type trPlanner struct {
	ctx    context.Context
	root   string
	res    *scan.Result
	st     *scanrmq.Store
	plan   *repair.Plan
	rep    *TruncateReport
	end    int64
	mapped int64
}

// add appends an action to the plan. Commitlog files (up to 1 GiB) are
// pinned by size, mtime and the hash of the changed range only; smaller
// files by their whole hash too.
func (t *trPlanner) add(a repair.Action, big bool) error {
	return t.plan.Add(a, repair.SnapshotOptions{SkipWholeFile: big})
}

func (t *trPlanner) note(format string, args ...any) {
	t.rep.Notes = append(t.rep.Notes, fmt.Sprintf(format, args...))
}

// trLoss builds a Loss, keeping at most TruncateMaxLostIDs ids.
func trLoss(records int64, ids []string, note string) repair.Loss {
	if len(ids) > TruncateMaxLostIDs {
		note += fmt.Sprintf("; %d more message ids not listed", len(ids)-TruncateMaxLostIDs)
		ids = ids[:TruncateMaxLostIDs]
	}
	return repair.Loss{Records: records, MsgIDs: ids, Note: note}
}
