package rabbitmq

// Checks of the clean-shutdown dumps against the files (§6 invariants 1,
// 2, 4, 5, 8, 11): a clean start trusts msg_store_index.ets and
// file_summary.ets blindly (§7b), so every disagreement is a read that
// fails or a message freed too early or never.

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/storectl/storectl/pkg/scan"
)

// fileTotals returns a file's record count, the bytes of its referenced
// records and where the last of them ends; a released file kept them.
func fileTotals(f *FileScan) (records int, valid, liveEnd int64) {
	if f.lean.done {
		return f.lean.records, f.lean.valid, f.lean.liveEnd
	}
	for _, r := range f.Records {
		if r.Status == StatusReferenced {
			valid += r.TotalSize
			liveEnd = max(liveEnd, r.End())
		}
	}
	return len(f.Records), valid, liveEnd
}

// entryMiss is what is at an index entry's place when it is not the
// entry's record, and where that record is (nil: no numbered file has it).
type entryMiss struct {
	actual string
	found  *copyRec
}

// indexEntryFinding is the finding of one msg_store_index.ets object (the
// one at etsOff of the dump at path): loc is set when its place does not
// hold its record, n (the queues' references to it) when the references
// are known. ok is false when the entry agrees with both.
func indexEntryFinding(path string, etsOff int64, e IndexEntry, loc *entryMiss, n *int64) (f scan.Finding, ok bool) {
	id := hexID(e.MsgID)
	f = scan.Finding{Code: CodeIndexMismatch, Path: path, Offset: etsOff, MsgID: id,
		Repair: scan.RepairRebuildIndex, Evidence: map[string]string{},
		Details: map[string]any{"ref_count": e.RefCount, "file": e.File, "offset": e.Offset, "total_size": e.TotalSize}}
	var why []string
	if loc != nil {
		f.Evidence["location"] = "fail"
		f.Severity = scan.Warning // ref count 0: nothing reads it
		if e.RefCount > 0 {
			f.Severity = scan.Error
		}
		f.Expected = fmt.Sprintf("record %s of %d bytes at %d.rdq@%d", id, e.TotalSize, e.File, e.Offset)
		f.Actual = loc.actual
		if c := loc.found; c != nil {
			f.Details["found_at"] = Location{Path: c.path, Offset: c.off}
			f.Actual += fmt.Sprintf("; the record is at %s@%d (%d bytes)", c.path, c.off, c.size)
		}
		why = append(why, "its offset/size does not hold its record")
	} else {
		f.Evidence["location"] = "pass"
	}
	if n != nil {
		f.Details["references"] = *n
		if e.RefCount != *n {
			f.Evidence["ref_count"] = "fail"
			sev := scan.Warning // too high: the message is never freed (disk leak)
			if e.RefCount < *n {
				sev = scan.Error // too low: freed while a queue still holds it
			}
			f.Severity = max(f.Severity, sev)
			why = append(why, fmt.Sprintf("ref count %d, but the queue indexes hold %d references", e.RefCount, *n))
		} else {
			f.Evidence["ref_count"] = "pass"
		}
	}
	if len(why) == 0 {
		return f, false
	}
	f.Message = fmt.Sprintf("msg_store_index.ets entry for %s: %s", id, strings.Join(why, "; "))
	return f, true
}

// indexLacksFinding is the finding of a referenced msg id (hex) that
// msg_store_index.ets does not hold: n references from queues.
func indexLacksFinding(path, id string, n int, queues []string) scan.Finding {
	return scan.Finding{Code: CodeIndexMismatch, Severity: scan.Error, Path: path, MsgID: id,
		Repair: scan.RepairRebuildIndex, Expected: fmt.Sprintf("an entry with ref count %d", n), Actual: "no entry",
		Evidence: map[string]string{"location": "fail"}, Details: map[string]any{"references": n, "queues": queues},
		Message: fmt.Sprintf("queues %v reference %s, which msg_store_index.ets does not hold: after a clean start reading it fails", queues, id)}
}

// cleanChecksUnknown is the finding that says which checks of the
// clean-shutdown dumps were not made for want of a file that could not be
// read (none when every file was read): ref counts and valid sizes need
// every queue index, an entry or summary of an .rdq needs that file.
func cleanChecksUnknown(root string, v *VHostScan, cs *cleanState) []scan.Finding {
	var waits, what []string
	if v.Queues != nil && len(v.Queues.Unreadable) > 0 {
		for _, u := range v.Queues.Unreadable {
			waits = append(waits, scan.Rel(root, u.Path))
		}
		what = append(what, "ref counts and valid total sizes against the queue indexes")
	}
	n := len(waits)
	for _, f := range v.Files {
		if f.Err != nil && !f.Transient && f.Number >= 0 {
			waits = append(waits, f.Path)
		}
	}
	if len(waits) > n {
		what = append(what, "the entries and summaries of the .rdq files")
	}
	if len(waits) == 0 {
		return nil
	}
	path := cs.indexPath
	if path == "" {
		path = cs.summaryPath
	}
	sort.Strings(waits)
	return []scan.Finding{{Code: CodeIndexUnknown, Severity: scan.Warning, Path: path, Repair: scan.RepairNone,
		Details: map[string]any{"waits_on": waits},
		Message: fmt.Sprintf("clean-shutdown dumps not checked for %s: %s could not be read", strings.Join(what, " and "), strings.Join(waits, ", "))}}
}

// fileSummaryFindings checks file_summary.ets: one object per .rdq and
// back, ValidTotalSize equal to the bytes of the records queues reference
// (invariant 4, from the scan), and FileSize covering every live record
// and no more than the file holds (invariant 5).
func fileSummaryFindings(v *VHostScan, cs *cleanState) []scan.Finding {
	byNum := map[int64]*FileScan{}
	for _, f := range v.Files {
		if !f.Transient && f.Number >= 0 {
			byNum[f.Number] = f
		}
	}
	var out []scan.Finding
	// The bytes the queues reference are known when every queue index
	// was read (a queue dir not read holds references of its own).
	refsAll := v.RefsKnown && (v.Queues == nil || len(v.Queues.Unreadable) == 0)
	seen := map[int64]bool{}
	maxNum := int64(-1)
	for n := range byNum {
		maxNum = max(maxNum, n)
	}
	for i, s := range cs.summary {
		seen[s.File] = true
		base := scan.Finding{Code: CodeFileSummary, Path: cs.summaryPath, Offset: cs.summaryOffs[i], Repair: scan.RepairRebuildIndex,
			Details: map[string]any{"file": s.File, "valid_total_size": s.ValidTotalSize, "file_size": s.FileSize}}
		f := byNum[s.File]
		if f == nil {
			g := base
			g.Severity, g.Expected, g.Actual = scan.Error, strconv.FormatInt(s.File, 10)+".rdq", "no such file"
			g.Message = fmt.Sprintf("file_summary.ets has an entry for %d.rdq, which does not exist", s.File)
			out = append(out, g)
			continue
		}
		if f.Err != nil {
			continue // not read: its records, their size and its end are unknown
		}
		_, valid, liveEnd := fileTotals(f)
		var why []string
		sev := scan.Info
		if refsAll && s.ValidTotalSize != valid {
			why = append(why, fmt.Sprintf("valid total size %d, but the records queues reference add up to %d", s.ValidTotalSize, valid))
			sev = scan.Error
		}
		if s.FileSize < liveEnd {
			why = append(why, fmt.Sprintf("file size %d cuts the live record ending at %d", s.FileSize, liveEnd))
			sev = scan.Error
		}
		if s.FileSize > f.Size {
			why = append(why, fmt.Sprintf("file size %d, but the file holds %d bytes", s.FileSize, f.Size))
			sev = scan.Error
		}
		if len(why) == 0 && s.File == maxNum && f.Size > s.FileSize {
			why = append(why, fmt.Sprintf("the current file is %d bytes; the next start truncates it to %d", f.Size, s.FileSize))
		}
		if len(why) == 0 {
			continue
		}
		g := base
		g.Severity, g.Message = sev, fmt.Sprintf("file_summary.ets entry for %s: %s", f.Path, strings.Join(why, "; "))
		g.Details["scan_valid_total_size"], g.Details["physical_size"], g.Details["live_end"] = valid, f.Size, liveEnd
		out = append(out, g)
	}
	nums := make([]int64, 0, len(byNum))
	for n := range byNum {
		if !seen[n] {
			nums = append(nums, n)
		}
	}
	sort.Slice(nums, func(i, j int) bool { return nums[i] < nums[j] })
	for _, n := range nums {
		f := byNum[n]
		records, _, _ := fileTotals(f)
		out = append(out, scan.Finding{Code: CodeFileSummary, Severity: scan.Error, Path: f.Path, Length: f.Size,
			Repair: scan.RepairRebuildIndex, Expected: "an entry in file_summary.ets", Actual: "none",
			Details: map[string]any{"file": n, "records": records},
			Message: fmt.Sprintf("%s has no file_summary.ets entry: a clean start does not know the file", f.Path)})
	}
	return out
}
