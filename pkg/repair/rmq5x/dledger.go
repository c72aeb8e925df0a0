package rmq5x

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/storectl/storectl/internal/sparse"
	"github.com/storectl/storectl/internal/storefile"
	"github.com/storectl/storectl/pkg/format"
	fdl "github.com/storectl/storectl/pkg/format/dledger"
	rmq "github.com/storectl/storectl/pkg/format/rocketmq"
	"github.com/storectl/storectl/pkg/repair"
	"github.com/storectl/storectl/pkg/scan"
	"github.com/storectl/storectl/pkg/scan/cqueue"
	dlscan "github.com/storectl/storectl/pkg/scan/dledger"
)

// DLedgerTruncate is what PlanDLedgerTruncate planned.
type DLedgerTruncate struct {
	Recovery *dlscan.Recovery `json:"recovery"`
	Dropped  int              `json:"entries_dropped"`
	Notes    []string         `json:"notes,omitempty"`
	// Scan is the DLedger scan the plan was derived from.
	Scan *scan.Result `json:"-"`
}

// PlanDLedgerTruncate plans what DLedger's recovery does, made durable and
// without its System.exit: at the point where DLedgerMmapFileStore.recover
// stops, the rest of that data file is zeroed (DLedger only moves its
// write position, and entries left there whose pos fields still match
// would be read again once new appends reach them), later data files are
// moved to the backup, the index is zeroed from the unit after the end
// index and later index files moved, the checkpoint's committed and end
// index are capped at the end index, and consume queue units at or past
// the end are dropped. A store its recovery keeps whole gives an empty
// plan. cfg is the DLedger scan config; it only reads.
func PlanDLedgerTruncate(ctx context.Context, plan *repair.Plan, cfg dlscan.Config) (*DLedgerTruncate, error) {
	res, err := dlscan.Scan(ctx, cfg, scan.Options{})
	if err != nil {
		return nil, err
	}
	if res.Incomplete {
		return nil, fmt.Errorf("DLedger scan incomplete, refusing to plan from it: %v", res.Errors)
	}
	rc, _ := res.Extra["dledger"].(*dlscan.Recovery)
	rep := &DLedgerTruncate{Recovery: rc, Scan: res}
	if rc == nil {
		return rep, nil
	}
	dir := cfg.Dir
	if dir == "" {
		dirs := dlscan.Dirs(cfg.Root)
		if len(dirs) != 1 {
			return rep, nil
		}
		dir = dirs[0]
	}
	rel := scan.Rel(cfg.Root, dir)
	ids := droppedIDs(res)
	// Data: zero past the write position, remove the later files.
	n, err := cutFiles(plan, cfg.Root, rel+"/"+fdl.DataDir, rc.WritePos, repair.Loss{Records: int64(rc.Dropped), MsgIDs: ids,
		Note: fmt.Sprintf("DLedger entries past where its recovery stops (data offset %d: %s)", rc.WritePos, rc.StopReason)}, dlscan.CodeDropped)
	if err != nil {
		return nil, err
	}
	if n > 0 {
		rep.Dropped = rc.Dropped
	}
	// Index: zero past the end index's unit.
	if _, err := cutFiles(plan, cfg.Root, rel+"/"+fdl.IndexDir, rc.IndexWritePos, repair.Loss{Records: int64(rc.Dropped),
		Note: "index units past the end index"}, dlscan.CodeDropped); err != nil {
		return nil, err
	}
	if n == 0 {
		return rep, nil
	}
	// Checkpoint: committed and end index no later than the end.
	cpRel := rel + "/" + fdl.CheckpointFile
	if b, err := storefile.ReadFile(filepath.Join(cfg.Root, filepath.FromSlash(cpRel))); err == nil {
		if cp, err := fdl.DecodeCheckpoint(b); err == nil && (cp.CommittedIndex > rc.LedgerEndIndex || cp.EndIndex > rc.LedgerEndIndex) {
			cp.CommittedIndex, cp.EndIndex = min(cp.CommittedIndex, rc.LedgerEndIndex), min(cp.EndIndex, rc.LedgerEndIndex)
			if err := plan.Add(repair.Action{Op: repair.OpReplaceFile, Path: cpRel, Data: fdl.AppendCheckpoint(nil, cp), Reason: dlscan.CodeDropped,
				Lost: repair.Loss{Note: fmt.Sprintf("committed and end index capped at the end index %d", rc.LedgerEndIndex)}}, repair.SnapshotOptions{}); err != nil {
				return nil, err
			}
		}
	}
	// Consume queues: units at or past the end.
	if err := cutQueues(plan, cfg.Root, rc.WritePos+fdl.BodyOffset); err != nil {
		return nil, err
	}
	return rep, nil
}

func droppedIDs(res *scan.Result) []string {
	for _, f := range res.Findings {
		if f.Code == dlscan.CodeDropped {
			if v, ok := f.Details["msg_ids"].([]string); ok {
				return v
			}
		}
	}
	return nil
}

type relFile struct {
	rel  string
	base int64
	size int64
}

func listRel(root, relDir string) ([]relFile, error) {
	files, err := scan.OffsetFiles(filepath.Join(root, filepath.FromSlash(relDir)))
	if err != nil {
		return nil, err
	}
	var out []relFile
	for _, f := range files {
		out = append(out, relFile{rel: relDir + "/" + f.Name, base: f.Base, size: f.Size})
	}
	return out, nil
}

// cutFiles is MmapFileList.truncateOffset(end) made durable: the file
// holding end is zeroed from there (if it holds a non-zero byte past it),
// files that start past end are moved to the backup. It returns how many
// actions it added.
func cutFiles(plan *repair.Plan, root, relDir string, end int64, loss repair.Loss, reason string) (int, error) {
	files, err := listRel(root, relDir)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, f := range files {
		switch {
		case f.base > end:
			if err := plan.Add(repair.Action{Op: repair.OpRemoveFile, Path: f.rel, Reason: reason, Lost: loss}, repair.SnapshotOptions{SkipWholeFile: true}); err != nil {
				return n, err
			}
			n++
		case end < f.base+f.size:
			from := end - f.base
			last, err := lastNonZero(filepath.Join(root, filepath.FromSlash(f.rel)), from, f.size)
			if err != nil {
				return n, err
			}
			if last < from {
				continue
			}
			if err := plan.Add(repair.Action{Op: repair.OpZeroRange, Path: f.rel, Offset: from, Length: last + 1 - from, Reason: reason, Lost: loss},
				repair.SnapshotOptions{SkipWholeFile: true}); err != nil {
				return n, err
			}
			n++
		}
	}
	return n, nil
}

// lastNonZero is the offset of the last non-zero byte of [from, to) of the
// file, or from-1 when there is none; holes are not read.
func lastNonZero(path string, from, to int64) (int64, error) {
	f, err := storefile.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	last := from - 1
	buf := make([]byte, 1<<20)
	err = sparse.Extents(f, to, func(off, end int64) error {
		off = max(off, from)
		for p := off; p < end; p += int64(len(buf)) {
			b := buf[:min(int64(len(buf)), end-p)]
			if _, err := f.ReadAt(b, p); err != nil {
				return err
			}
			if i := format.LastNonZero(b); i >= 0 {
				last = p + int64(i)
			}
		}
		return nil
	})
	return last, err
}

// cutQueues drops the consume queue units whose offset is at or past end
// (ConsumeQueue.truncateDirtyLogicFiles): the rest of their file zeroed,
// later files moved to the backup.
func cutQueues(plan *repair.Plan, root string, end int64) error {
	qs, err := cqueue.List(root)
	if err != nil {
		if err == cqueue.ErrRocksDB {
			return nil
		}
		return err
	}
	for _, q := range qs {
		first := int64(-1)
		if _, err := q.Each(func(idx int64, u rmq.CQUnit) bool {
			if u.CommitLogOffset >= end {
				first = idx
				return false
			}
			return true
		}); err != nil {
			return err
		}
		if first < 0 {
			continue
		}
		at := first * rmq.CQUnitSize
		for _, f := range q.Files {
			switch {
			case f.Base > at:
				if err := plan.Add(repair.Action{Op: repair.OpRemoveFile, Path: f.Rel, Reason: dlscan.CodeCQTruncated,
					Lost: repair.Loss{Note: "consume queue file past the DLedger end"}}, repair.SnapshotOptions{}); err != nil {
					return err
				}
			case at < f.Base+f.Size:
				from := at - f.Base
				last, err := lastNonZero(f.Path, from, f.Size)
				if err != nil {
					return err
				}
				if last < from {
					continue
				}
				if err := plan.Add(repair.Action{Op: repair.OpZeroRange, Path: f.Rel, Offset: from, Length: last + 1 - from, Reason: dlscan.CodeCQTruncated,
					Lost: repair.Loss{Records: (last + 1 - from + rmq.CQUnitSize - 1) / rmq.CQUnitSize, Note: fmt.Sprintf("consume queue units at or past the DLedger end %d", end)}},
					repair.SnapshotOptions{}); err != nil {
					return err
				}
			}
		}
		q.Close()
	}
	return nil
}
