package rocketmq

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"sort"
	"strings"

	"github.com/storectl/storectl/internal/sparse"
	"github.com/storectl/storectl/internal/storefile"
	rmq "github.com/storectl/storectl/pkg/format/rocketmq"
	"github.com/storectl/storectl/pkg/repair"
	scanrmq "github.com/storectl/storectl/pkg/scan/rocketmq"
)

// rbReadOpt reads a file; a missing file is nil, false.
func rbReadOpt(p string) ([]byte, bool, error) {
	b, err := storefile.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false, nil
	}
	return b, err == nil, err
}

// rbReadInto is rbReadOpt into *buf, reused from call to call (grown to
// the largest file read): comparing a store's consume queue files then
// allocates two file-sized buffers, not two per file. The result is valid
// until the next call with the same buf.
func rbReadInto(p string, buf *[]byte) ([]byte, bool, error) {
	f, err := storefile.Open(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, false, err
	}
	if st.Size() > MaxCQFileSize || !st.Mode().IsRegular() {
		b, err := io.ReadAll(f) // not a consume queue file as the rebuild writes them: no reuse
		return b, err == nil, err
	}
	if int64(cap(*buf)) < st.Size() {
		*buf = make([]byte, st.Size())
	}
	b := (*buf)[:st.Size()]
	n, err := io.ReadFull(f, b)
	if errors.Is(err, io.ErrUnexpectedEOF) { // shrank since Stat: what is there
		err = nil
	}
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, false, err
	}
	b = b[:n]
	// Grew since Stat: read the rest as ReadFile would.
	rest, err := io.ReadAll(f)
	if err != nil {
		return nil, false, err
	}
	if len(rest) > 0 {
		b = append(b[:n:n], rest...)
	}
	return b, true, nil
}

// rbUnits decodes every 20-byte unit of b (a trailing partial unit is
// ignored: it cannot be a unit).
func rbUnits(b []byte) []rmq.CQUnit {
	out := make([]rmq.CQUnit, 0, len(b)/rmq.CQUnitSize)
	for i := 0; i+rmq.CQUnitSize <= len(b); i += rmq.CQUnitSize {
		u, _ := rmq.DecodeCQUnit(b[i:i+rmq.CQUnitSize], int64(i))
		out = append(out, u)
	}
	return out
}

// rbCompareCQ emits replace-file for every rebuilt CQ file whose bytes
// differ from the store's (or that is missing; repair.Apply creates its
// missing dirs), remove-file for every existing CQ file the rebuild does
// not produce, remove-dir for the queue and topic dirs those removals
// empty, and fills rep.Queues and rep.Warnings. It builds the queues from
// d (cqbBuild) one file at a time and stages the rebuilt files under
// stage: all of them with stageAll, else those that differ. Each rebuilt
// file is compared from memory; only the store's is read.
func rbCompareCQ(plan *repair.Plan, data, stage string, stageAll bool, d *rbData, ex *rbExisting, rep *RebuildReport) error {
	want := map[string]bool{}
	diffs := map[rbQueue]*QueueDiff{}
	diffOf := func(k rbQueue) *QueueDiff {
		if d := diffs[k]; d != nil {
			return d
		}
		d := &QueueDiff{Topic: k.Topic, QueueID: k.QueueID, Complete: true}
		diffs[k] = d
		return d
	}
	note := func(d *QueueDiff, ud UnitDiff) {
		switch ud.Kind {
		case UnitAdded:
			d.Added++
		case UnitRemoved:
			d.Removed++
		default:
			d.Changed++
		}
		if len(d.Diffs) < MaxListedUnits {
			d.Diffs = append(d.Diffs, ud)
		} else {
			d.Complete = false
		}
	}
	newBuf := make([]byte, rep.CQFileSize)
	dirty := 0 // newBuf[:dirty] may hold an earlier file's units
	var oldBuf, chunk []byte
	file := func(q rbQueue, f cqbFile) error {
		d := diffOf(q)
		rel, newB := f.rel, f.bytes
		want[rel] = true
		// newBuf[:CQFileSize] is the whole rebuilt file: its units, then
		// zeros (what is left of an earlier file's units is cleared).
		copy(newBuf, newB)
		clear(newBuf[len(newB):max(dirty, len(newB))])
		dirty = len(newB)
		// Only the store's data is read (its holes compare as zeros);
		// a file that differs is read whole for its unit diffs.
		path := filepath.Join(data, rel)
		same, exists, ok, err := rbSameSparse(path, newBuf[:rep.CQFileSize], len(newB), &chunk)
		if err != nil {
			return err
		}
		var oldB []byte
		if !ok || (exists && !same) {
			if oldB, exists, err = rbReadInto(path, &oldBuf); err != nil {
				return err
			}
			same = exists && bytes.Equal(oldB, newBuf[:rep.CQFileSize])
		}
		if stageAll || !same {
			if err := stageFile(stage, rel, newB, rep.CQFileSize); err != nil {
				return err
			}
		}
		if same {
			return nil
		}
		rbUnitDiffs(rel, oldB, newB, func(ud UnitDiff) { note(d, ud) })
		reason := scanrmq.CodeCQBadUnit
		if !exists {
			reason = scanrmq.CodeCQMissing
		}
		d.Files = append(d.Files, rel)
		return rbAdd(plan, repair.Action{Op: repair.OpReplaceFile, Path: rel, Source: filepath.Join(stage, rel),
			Reason: reason, Lost: repair.Loss{Note: "derived data: rebuilt from the commitlog"}}, rep)
	}
	warns, err := cqbBuild(d, rep.CQFileSize, file, func(q rbQueue, records int64) { diffOf(q).Units = records })
	if err != nil {
		return err
	}
	rep.Warnings = append(rep.Warnings, warns...)
	extra := make([]string, 0)
	for rel := range ex.cq {
		if !want[rel] {
			extra = append(extra, rel)
		}
	}
	sort.Strings(extra)
	var removed []string
	for _, rel := range extra {
		k, ok := rbQueueOf(rel)
		if !ok {
			continue
		}
		removed = append(removed, rel)
		oldB, _, err := rbReadOpt(filepath.Join(data, rel))
		if err != nil {
			return err
		}
		d := diffOf(k)
		rbUnitDiffs(rel, oldB, nil, func(ud UnitDiff) { note(d, ud) })
		d.Files = append(d.Files, rel)
		if err := plan.Add(repair.Action{Op: repair.OpRemoveFile, Path: rel, Reason: scanrmq.CodeCQExtraFile,
			Lost: repair.Loss{Records: int64(len(rbUnits(oldB))), Note: "consume queue file no commitlog record before the recovery end maps to"}}, repair.SnapshotOptions{}); err != nil {
			return err
		}
	}
	if err := rbRemoveEmptiedDirs(plan, ex, want, removed, diffs); err != nil {
		return err
	}
	for _, d := range diffs {
		rep.Queues = append(rep.Queues, *d)
	}
	sort.Slice(rep.Queues, func(i, j int) bool {
		a, b := rep.Queues[i], rep.Queues[j]
		return a.Topic < b.Topic || a.Topic == b.Topic && a.QueueID < b.QueueID
	})
	return nil
}

// rbUnitDiffs calls fn for every unit position where oldB and newB (whole
// CQ files; either may be shorter or nil) differ.
func rbUnitDiffs(rel string, oldB, newB []byte, fn func(UnitDiff)) {
	base, _ := rmq.ParseFileName(filepath.Base(rel))
	n := max(len(oldB), len(newB))
	for off := 0; off+rmq.CQUnitSize <= n; off += rmq.CQUnitSize {
		o, w := rbUnitAt(oldB, off), rbUnitAt(newB, off)
		if o == w {
			continue
		}
		kind := UnitChanged
		switch {
		case o.IsZero():
			kind = UnitAdded
		case w.IsZero():
			kind = UnitRemoved
		}
		fn(UnitDiff{Kind: kind, Index: (base + int64(off)) / rmq.CQUnitSize, File: filepath.ToSlash(rel), Offset: int64(off), Old: o, New: w})
	}
}

func rbUnitAt(b []byte, off int) rmq.CQUnit {
	if off+rmq.CQUnitSize > len(b) {
		return rmq.CQUnit{}
	}
	u, _ := rmq.DecodeCQUnit(b[off:off+rmq.CQUnitSize], int64(off))
	return u
}

// rbQueueOf parses consumequeue/<topic>/<qid>/<name>.
func rbQueueOf(rel string) (rbQueue, bool) {
	parts := strings.Split(filepath.ToSlash(rel), "/")
	if len(parts) != 4 {
		return rbQueue{}, false
	}
	var id int32
	if _, err := fmt.Sscanf(parts[2], "%d", &id); err != nil {
		return rbQueue{}, false
	}
	return rbQueue{Topic: parts[1], QueueID: id}, true
}

// rbDiffIndex compares two files in 1 MiB chunks and reports, for an index
// layout, the differing header, slots and entries of their common length
// (files of different sizes are not the same). Chunks that are holes in
// both files are equal without a read (a preallocated index file is
// mostly a hole), and a chunk is looked at byte by byte only when it
// differs.
func rbDiffIndex(oldPath, newPath string, lay rmq.IndexLayout, d *IndexFileDiff) (same bool, err error) {
	of, err := storefile.Open(oldPath)
	if err != nil {
		return false, err
	}
	defer of.Close()
	nf, err := storefile.Open(newPath)
	if err != nil {
		return false, err
	}
	defer nf.Close()
	ost, err := of.Stat()
	if err != nil {
		return false, err
	}
	nst, err := nf.Stat()
	if err != nil {
		return false, err
	}
	osz, nsz := ost.Size(), nst.Size()
	ora, err := sparse.NewReaderAt(of, osz)
	if err != nil {
		return false, err
	}
	nra, err := sparse.NewReaderAt(nf, nsz)
	if err != nil {
		return false, err
	}
	const chunk = 1 << 20
	ob, nb := make([]byte, chunk), make([]byte, chunk)
	slotEnd := lay.EntryOffset(0)
	lastSlot, lastEntry := int64(-1), int64(-1)
	same = osz == nsz
	n := min(osz, nsz)
	for off := int64(0); off < n; off += chunk {
		m := min(chunk, n-off)
		if !ora.Data(off, off+m) && !nra.Data(off, off+m) {
			continue
		}
		o, nw := ob[:m], nb[:m]
		if _, err := ora.ReadAt(o, off); err != nil {
			return false, err
		}
		if _, err := nra.ReadAt(nw, off); err != nil {
			return false, err
		}
		if bytes.Equal(o, nw) {
			continue
		}
		for i := range o {
			if o[i] == nw[i] {
				continue
			}
			same = false
			p := off + int64(i)
			switch {
			case p < rmq.IndexHeaderSize:
				d.HeaderDiffers = true
			case p < slotEnd:
				if s := (p - rmq.IndexHeaderSize) / rmq.IndexSlotSize; s != lastSlot {
					d.SlotsDiffer, lastSlot = d.SlotsDiffer+1, s
				}
			default:
				if e := (p - slotEnd) / rmq.IndexEntrySize; e != lastEntry {
					d.EntriesDiffer, lastEntry = d.EntriesDiffer+1, e
					if len(d.DifferingEntry) < MaxListedUnits {
						d.DifferingEntry = append(d.DifferingEntry, e)
					}
				}
			}
		}
	}
	return same, nil
}
