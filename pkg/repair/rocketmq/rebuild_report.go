package rocketmq

import (
	rmq "github.com/storectl/storectl/pkg/format/rocketmq"
	"github.com/storectl/storectl/pkg/scan"
)

// MaxListedUnits bounds the unit indexes a QueueDiff (and the entry
// numbers an IndexFileDiff) lists: a rebuild of a deleted consumequeue dir
// adds every unit, and the report must stay readable; the counts are
// always complete.
const MaxListedUnits = 200

// RebuildReport says what PlanRebuildIndex found and would change.
type RebuildReport struct {
	DataDir         string            `json:"data_dir"`
	StageDir        string            `json:"stage_dir,omitempty"` // set when the stage was kept for Apply
	RecoveryEnd     int64             `json:"recovery_end"`        // records at or past it are not dispatched
	Records         int               `json:"records"`             // valid records before the recovery end
	IndexKeys       int               `json:"index_keys"`          // index keys of those records
	LMQRecords      int               `json:"lmq_records"`         // records with INNER_MULTI_DISPATCH
	CQFileSize      int64             `json:"cq_file_size"`
	CQFileSizeFrom  string            `json:"cq_file_size_from"` // config | existing files | default
	IndexLayout     rmq.IndexLayout   `json:"index_layout"`
	IndexLayoutFrom string            `json:"index_layout_from"`
	Queues          []QueueDiff       `json:"queues"`
	IndexFiles      []IndexFileDiff   `json:"index_files"`
	Checkpoint      *CheckpointDiff   `json:"checkpoint,omitempty"`
	Warnings        []DispatchWarning `json:"warnings,omitempty"` // dispatch anomalies (skipped or gap-filled units)
	Notes           []string          `json:"notes,omitempty"`
	// Scan is the commitlog scan the plan was derived from.
	Scan *scan.Result `json:"-"`
}

// QueueDiff compares one rebuilt consume queue with the store's.
type QueueDiff struct {
	Topic    string     `json:"topic"`
	QueueID  int32      `json:"queue_id"`
	Units    int64      `json:"units"` // rebuilt units with a message (placeholders excluded)
	Added    int64      `json:"added"`
	Removed  int64      `json:"removed"`
	Changed  int64      `json:"changed"`
	Diffs    []UnitDiff `json:"diffs,omitempty"` // the first MaxListedUnits differences
	Files    []string   `json:"files"`           // files replaced or removed
	Complete bool       `json:"complete"`        // Diffs lists every difference
	// DirRemoved says the queue dir is removed: the plan removes every
	// file in it and rebuilds none.
	DirRemoved bool `json:"dir_removed,omitempty"`
}

// Unit difference kinds.
const (
	UnitAdded   = "added"
	UnitRemoved = "removed"
	UnitChanged = "changed"
)

// UnitDiff is one consume queue unit that differs: its unit index (the
// queue offset), file and byte offset in that file, and both values.
type UnitDiff struct {
	Kind   string     `json:"kind"`
	Index  int64      `json:"index"`
	File   string     `json:"file"`
	Offset int64      `json:"offset"`
	Old    rmq.CQUnit `json:"old"`
	New    rmq.CQUnit `json:"new"`
}

// IndexFileDiff compares one rebuilt index file with the store's file of
// the same name (Old* zero when it is missing). For a removed file New is
// the zero header.
type IndexFileDiff struct {
	Name           string          `json:"name"`
	Action         string          `json:"action"` // replace | create | remove | same
	NameDerived    bool            `json:"name_derived"`
	Old            rmq.IndexHeader `json:"old"`
	New            rmq.IndexHeader `json:"new"`
	HeaderDiffers  bool            `json:"header_differs"`
	SlotsDiffer    int64           `json:"slots_differ"`
	EntriesDiffer  int64           `json:"entries_differ"`
	DifferingEntry []int64         `json:"differing_entries,omitempty"` // the first MaxListedUnits entry numbers
}

// CheckpointDiff is the change to the checkpoint's logics and index
// timestamps (bytes 8..24).
type CheckpointDiff struct {
	OldLogics int64 `json:"old_logics_msg_timestamp"`
	NewLogics int64 `json:"new_logics_msg_timestamp"`
	OldIndex  int64 `json:"old_index_msg_timestamp"`
	NewIndex  int64 `json:"new_index_msg_timestamp"`
	Changed   bool  `json:"changed"`
}

// PlanEmpty reports whether nothing needs to change.
func (r *RebuildReport) PlanEmpty() bool {
	for _, q := range r.Queues {
		if q.Added+q.Removed+q.Changed > 0 || len(q.Files) > 0 {
			return false
		}
	}
	for _, f := range r.IndexFiles {
		if f.Action != "same" {
			return false
		}
	}
	return r.Checkpoint == nil || !r.Checkpoint.Changed
}
