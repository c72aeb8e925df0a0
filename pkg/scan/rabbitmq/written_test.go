package rabbitmq

import (
	"encoding/hex"
	"fmt"
	"sort"
	"testing"

	gen "github.com/storectl/storectl/internal/gen/rabbitmq"
	"github.com/storectl/storectl/pkg/scan"
)

// checkWritten checks a scan of a generated store against what the
// generator wrote (gen.Config.KeepRecords), the truth independent of the
// scan: per .rdq of sum.Files not in gone (deleted before the scan) the
// file's record count and first and last record offsets, exactly one
// record line per written record at its place with its id, size and
// status (referenced by its queue, or unreferenced), one unreferenced
// finding per file summing that file's unreferenced records, and one
// message-missing finding per referenced record of a gone file. recs nil
// skips the record lines. It returns the records checked.
func checkWritten(t *testing.T, root string, sum *gen.Summary, gone map[int]bool, res *scan.Result, recs []RecordJSON) int {
	t.Helper()
	if len(sum.Written) != sum.Records {
		t.Fatalf("%d records written, %d listed: generate with KeepRecords", sum.Records, len(sum.Written))
	}
	type unref struct {
		n                  int
		bytes, first, last int64
		firstID, lastID    string
	}
	wantLines := map[string]string{} // path@offset -> what the line must say
	wantUnref := map[string]*unref{}
	wantMissing := map[string]bool{}
	type span struct {
		n           int
		first, last int64
	}
	wantFiles := map[string]*span{}
	for i, p := range sum.Files {
		if !gone[i] {
			wantFiles[scan.Rel(root, p)] = &span{first: -1, last: -1}
		}
	}
	for _, w := range sum.Written {
		id := hex.EncodeToString(w.ID[:])
		path := scan.Rel(root, sum.Files[w.File])
		if gone[w.File] {
			if w.Queue != "" {
				wantMissing[id] = true
			}
			continue
		}
		sp := wantFiles[path]
		if sp.n == 0 {
			sp.first = w.Offset
		}
		sp.n, sp.last = sp.n+1, w.Offset
		status, by := StatusUnreferenced, "[]"
		if w.Queue != "" {
			status, by = StatusReferenced, "["+w.Queue+"]"
		} else {
			u := wantUnref[path]
			if u == nil {
				u = &unref{first: w.Offset, firstID: id}
				wantUnref[path] = u
			}
			u.n++
			u.bytes += w.Size
			u.last, u.lastID = w.Offset, id
		}
		wantLines[fmt.Sprintf("%s@%d", path, w.Offset)] = fmt.Sprintf("%s %d %s %s", id, w.Size, status, by)
	}
	files := 0
	for _, f := range res.Files {
		sp := wantFiles[f.Path]
		if sp == nil {
			t.Errorf("%s: scanned, not written", f.Path)
			continue
		}
		files++
		if f.Records != sp.n || f.FirstValid != sp.first || f.LastValid != sp.last {
			t.Errorf("%s: %d records %d..%d, written %d at %d..%d", f.Path, f.Records, f.FirstValid, f.LastValid, sp.n, sp.first, sp.last)
		}
	}
	if files != len(wantFiles) {
		t.Errorf("%d files scanned, %d written", files, len(wantFiles))
	}
	if recs != nil {
		seen := map[string]bool{}
		for _, r := range recs {
			k := fmt.Sprintf("%s@%d", r.Path, r.Offset)
			got := fmt.Sprintf("%s %d %s %v", r.MsgID, r.Size, r.Status, r.ReferencedBy)
			if want, ok := wantLines[k]; !ok || got != want || seen[k] {
				t.Errorf("record line %s: %s, written %q (seen before: %v)", k, got, want, seen[k])
			}
			seen[k] = true
		}
		if len(seen) != len(wantLines) {
			t.Errorf("%d record lines, %d records written", len(seen), len(wantLines))
		}
	}
	n := 0
	for _, f := range res.Findings {
		switch f.Code {
		case CodeUnreferenced:
			n++
			u, d := wantUnref[f.Path], f.Details
			if u == nil || d["records"] != u.n || d["bytes"] != u.bytes || f.Offset != u.first || d["first_offset"] != u.first ||
				d["last_offset"] != u.last || d["first_msg_id"] != u.firstID || d["last_msg_id"] != u.lastID ||
				f.Length < u.last-u.first || (u.n == 1) != (f.MsgID != "") {
				t.Errorf("%s: unreferenced finding %+v, written %+v", f.Path, f, u)
			}
		case CodeMessageMissing:
			if !wantMissing[f.MsgID] {
				t.Errorf("message-missing %s: not a referenced record of a deleted file", f.MsgID)
			}
			delete(wantMissing, f.MsgID)
		}
	}
	if n != len(wantUnref) {
		t.Errorf("%d unreferenced findings, %d files with unreferenced records written", n, len(wantUnref))
	}
	if len(wantMissing) > 0 {
		var ids []string
		for id := range wantMissing {
			ids = append(ids, id)
		}
		sort.Strings(ids)
		t.Errorf("%d referenced records of deleted files without a message-missing finding: %v", len(ids), ids)
	}
	return len(sum.Written)
}
