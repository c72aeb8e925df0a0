package rocketmq

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/storectl/storectl/internal/storefile"
	rmq "github.com/storectl/storectl/pkg/format/rocketmq"
	"github.com/storectl/storectl/pkg/repair"
	scanrmq "github.com/storectl/storectl/pkg/scan/rocketmq"
)

// rbNameIndexFiles names the rebuilt index files. The broker names a file
// by its creation local time (yyyyMMddHHmmssSSS), which a rebuild cannot
// know: existing names are reused in order, and each further file is named
// by the store time of the record whose dispatch created it (in loc),
// bumped by 1 ms where needed so names stay unique and ascending — the
// broker loads index files in name order.
func rbNameIndexFiles(files []*idxbFile, ex *rbExisting, loc *time.Location, rep *RebuildReport) error {
	prev := ""
	derived := 0
	for i, f := range files {
		if i < len(ex.index) {
			f.name = ex.index[i]
		} else {
			f.name = rmq.IndexFileName(f.created, loc)
			derived++
			for f.name <= prev {
				n, err := strconv.ParseInt(prev, 10, 64)
				if err != nil || len(prev) != rbIndexNameLen {
					return fmt.Errorf("index file name %q: cannot derive a later name", prev)
				}
				f.name = fmt.Sprintf("%017d", n+1)
			}
		}
		prev = f.name
		dst := filepath.Join(filepath.Dir(f.path), f.name)
		if err := os.Rename(f.path, dst); err != nil {
			return err
		}
		f.path = dst
	}
	if derived > 0 {
		rep.Notes = append(rep.Notes, fmt.Sprintf("%d new index file name(s) derived from the store time of the record that created each file (%s); the broker uses its creation wall-clock time, which a rebuild cannot know", derived, loc))
	}
	return nil
}

// rbCompareIndex emits replace-file for every rebuilt index file that
// differs from (or is missing in) the store and remove-file for existing
// index files past the rebuilt ones.
func rbCompareIndex(plan *repair.Plan, data string, files []*idxbFile, ex *rbExisting, rep *RebuildReport) error {
	for i, f := range files {
		rel := filepath.Join("index", f.name)
		d := IndexFileDiff{Name: f.name, New: f.hdr, NameDerived: i >= len(ex.index)}
		old := filepath.Join(data, rel)
		if _, err := os.Stat(old); err == nil {
			d.Old, _ = rbReadIndexHeader(old)
			d.HeaderDiffers = d.Old != d.New
			same, err := rbDiffIndex(old, f.path, rep.IndexLayout, &d)
			if err != nil {
				return err
			}
			d.Action = "same"
			if !same {
				d.Action = "replace"
			}
		} else {
			d.Action, d.HeaderDiffers, d.EntriesDiffer = "create", true, int64(f.hdr.IndexCount-1)
		}
		rep.IndexFiles = append(rep.IndexFiles, d)
		if d.Action == "same" {
			continue
		}
		if err := rbAdd(plan, repair.Action{Op: repair.OpReplaceFile, Path: rel, Source: f.path, Reason: scanrmq.CodeIndexBadEntry,
			Lost: repair.Loss{Note: "derived data: rebuilt from the commitlog"}}, rep); err != nil {
			return err
		}
	}
	for _, name := range ex.index[min(len(files), len(ex.index)):] {
		rel := filepath.Join("index", name)
		d := IndexFileDiff{Name: name, Action: "remove"}
		d.Old, _ = rbReadIndexHeader(filepath.Join(data, rel))
		d.EntriesDiffer = max(int64(d.Old.IndexCount)-1, 0)
		rep.IndexFiles = append(rep.IndexFiles, d)
		if err := plan.Add(repair.Action{Op: repair.OpRemoveFile, Path: rel, Reason: scanrmq.CodeIndexExtraFile,
			Lost: repair.Loss{Records: d.EntriesDiffer, Note: "index file beyond the rebuilt ones"}}, repair.SnapshotOptions{}); err != nil {
			return err
		}
	}
	return nil
}

func rbReadIndexHeader(p string) (rmq.IndexHeader, error) {
	f, err := storefile.Open(p)
	if err != nil {
		return rmq.IndexHeader{}, err
	}
	defer f.Close()
	var b [rmq.IndexHeaderSize]byte
	if _, err := f.ReadAt(b[:], 0); err != nil {
		return rmq.IndexHeader{}, err
	}
	return rmq.DecodeIndexHeader(b[:], 0)
}

// rbCheckpoint plans the checkpoint's logicsMsgTimestamp (store time of
// the last record dispatched to a consume queue, as putMessagePositionInfo
// sets it) and indexMsgTimestamp (endTimestamp of the last full index
// file, as IndexService sets it when a file fills; unchanged when no
// rebuilt file is full). lastDispatch is the store time of the last
// record before the recovery end dispatched to a consume queue (nil:
// none). A part that is skipped keeps its value; without a checkpoint
// file nothing is planned.
func rbCheckpoint(plan *repair.Plan, cfg *RebuildConfig, lastDispatch *int64, idx []*idxbFile, rep *RebuildReport) error {
	b, exists, err := rbReadOpt(filepath.Join(cfg.DataDir, "checkpoint"))
	if err != nil {
		return err
	}
	if !exists || len(b) < rmq.CheckpointSize {
		rep.Notes = append(rep.Notes, "no checkpoint file (or shorter than 40 bytes): its timestamps are not planned")
		return nil
	}
	cp, err := rmq.DecodeCheckpoint(b, 0)
	if err != nil {
		return err
	}
	cd := &CheckpointDiff{OldLogics: cp.LogicsMsgTimestamp, NewLogics: cp.LogicsMsgTimestamp,
		OldIndex: cp.IndexMsgTimestamp, NewIndex: cp.IndexMsgTimestamp}
	if !cfg.SkipConsumeQueue && lastDispatch != nil {
		cd.NewLogics = *lastDispatch
	}
	if !cfg.SkipIndex {
		for i := len(idx) - 1; i >= 0; i-- {
			if idx[i].full {
				cd.NewIndex = idx[i].hdr.EndTimestamp
				break
			}
		}
	}
	cd.Changed = cd.NewLogics != cd.OldLogics || cd.NewIndex != cd.OldIndex
	rep.Checkpoint = cd
	if !cd.Changed {
		return nil
	}
	off, data := cd.planned()
	return plan.Add(repair.Action{Op: repair.OpWriteRange, Path: "checkpoint", Offset: off, Length: int64(len(data)), Data: data,
		Reason: scanrmq.CodeCheckpointTimestamps, Lost: repair.Loss{Note: "logicsMsgTimestamp and indexMsgTimestamp"}}, repair.SnapshotOptions{})
}

// planned returns the bytes the plan writes into the checkpoint file and
// their offset; the plan and the verified view of the rebuilt store
// (rbVerifyView) both take them from here.
func (cd *CheckpointDiff) planned() (int64, []byte) {
	return rmq.CheckpointTimestampsOffset, rmq.AppendCheckpointTimestamps(nil, cd.NewLogics, cd.NewIndex)
}
