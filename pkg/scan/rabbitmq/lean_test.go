package rabbitmq

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	gen "github.com/storectl/storectl/internal/gen/rabbitmq"
	rfmt "github.com/storectl/storectl/pkg/format/rabbitmq"
	"github.com/storectl/storectl/pkg/scan"
)

// scanWith runs Scan on one vhost dir; recs, when set, takes the record
// lines (without a record callback the scan may use the index digest).
func scanWith(t *testing.T, root, dir string, recs *[]any) *scan.Result {
	t.Helper()
	opts := scan.Options{Jobs: 2}
	if recs != nil {
		opts.Records = func(r any) error { *recs = append(*recs, r); return nil }
	}
	res, err := Scan(context.Background(), Config{Root: root, VHostDirs: []string{dir}}, opts)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// recordLines are the RecordJSON lines of a record callback.
func recordLines(recs []any) []RecordJSON {
	out := make([]RecordJSON, len(recs))
	for i, r := range recs {
		out[i] = r.(RecordJSON)
	}
	return out
}

// TestScanMatchesWritten: on generated stores with holes and unreferenced
// records, one with a deleted file (message-missing findings) and one with
// the clean-shutdown files, Scan's files, record lines, unreferenced and
// message-missing findings are what the generator wrote (checkWritten),
// with the record callback and without it (the clean store's index
// digest), at --jobs 2.
func TestScanMatchesWritten(t *testing.T) {
	defer spillAll()()
	t.Run("deleted-file", func(t *testing.T) {
		root, dir, sum := genDeletedFileSum(t)
		var recs []any
		n := checkWritten(t, root, sum, map[int]bool{1: true}, scanWith(t, root, dir, &recs), recordLines(recs))
		checkWritten(t, root, sum, map[int]bool{1: true}, scanWith(t, root, dir, nil), nil)
		t.Logf("%d written records checked", n)
	})
	t.Run("clean", func(t *testing.T) {
		root, sum := genClean(t)
		var recs []any
		res := scanWith(t, root, sum.VHostDir, &recs)
		n := checkWritten(t, root, sum, nil, res, recordLines(recs))
		for _, r := range recordLines(recs) {
			if want := map[string]string{StatusReferenced: "match", StatusUnreferenced: "absent"}[r.Status]; r.IndexMatch != want {
				t.Errorf("%s@%d (%s): index %q, the generator's index says %q", r.Path, r.Offset, r.Status, r.IndexMatch, want)
			}
		}
		checkWritten(t, root, sum, nil, scanWith(t, root, sum.VHostDir, nil), nil)
		if fs := codes(res.Findings, CodeIndexMismatch); len(fs) > 0 {
			t.Errorf("%d index.mismatch findings on a right index", len(fs))
		}
		t.Logf("%d written records checked", n)
	})
}

// genDeletedFile generates an mc store with holes and unreferenced
// records, deletes its second .rdq (message-missing findings) and returns
// root and the vhost dir.
func genDeletedFile(t *testing.T) (root, dir string) {
	root, dir, _ = genDeletedFileSum(t)
	return root, dir
}

// genDeletedFileSum is genDeletedFile with what the generator wrote
// (Summary.Written).
func genDeletedFileSum(t *testing.T) (root, dir string, sum *gen.Summary) {
	t.Helper()
	root = t.TempDir()
	sum, err := gen.Generate(root, gen.Config{Seed: 3, Kind: gen.MC, TotalBytes: 6 << 20, FileLimit: 1 << 20,
		HoleEvery: 7, UnrefEvery: 5, KeepRecords: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(sum.Files[1]); err != nil {
		t.Fatal(err)
	}
	return root, sum.VHostDir, sum
}

// TestScanCleanIndexDamage: with a damaged msg_store_index.ets (the 3.10
// clean-shutdown dump re-encoded with entries moved within their file,
// onto another record, into a file that does not exist, to one place
// twice, with a ref count of 0, and an id given twice so the later entry
// wins the per-record lookup), Scan, which checks the dump file by file
// without keeping the records, reports one index.mismatch at the .rdq
// place of each damaged entry and none for the others (the unchanged
// second entry of id 7), an error unless the entry's ref count is 0, and
// one error at the record's own place (where the undamaged dump had the
// entry): its index entry points elsewhere.
func TestScanCleanIndexDamage(t *testing.T) {
	root, dir := unpack(t, "clean-shutdown")
	ixPath := filepath.Join(dir, "msg_store_persistent", "msg_store_index.ets")
	var want []string
	editIndex(t, ixPath, func(locs []rfmt.MsgLocation) []rfmt.MsgLocation {
		if len(locs) < 12 {
			t.Fatalf("%d index entries", len(locs))
		}
		// Two entries in one file: the second is moved onto the first's record.
		a, b := -1, -1
		for i := range locs {
			for j := i + 1; j < len(locs) && a < 0; j++ {
				if locs[i].File == locs[j].File && locs[i].Offset != locs[j].Offset {
					a, b = i, j
				}
			}
		}
		if a < 0 || b < 7 && b > 1 {
			t.Fatalf("entries %d and %d in one file: want the second outside 2..6", a, b)
		}
		orig := slices.Clone(locs)
		locs[b].Offset = locs[a].Offset // onto another record
		locs[2].Offset += 9             // inside its record: nothing starts there
		locs[3].File = 9999             // a file that does not exist
		locs[4].File, locs[4].Offset = locs[a].File, locs[a].Offset
		locs[5].RefCount, locs[5].Offset = 0, locs[5].Offset+1
		dup := locs[6]
		dup.Offset += 3
		for _, k := range []int{b, 2, 3, 4, 5, 6} {
			e, o := locs[k], orig[k]
			if k == 6 {
				e = dup
			}
			sev := scan.Error
			if e.RefCount <= 0 {
				sev = scan.Warning
			}
			want = append(want, fmt.Sprintf("%x %d.rdq@%d %v", e.MsgID, e.File, e.Offset, sev),
				fmt.Sprintf("%x %d.rdq@%d %v", o.MsgID, o.File, o.Offset, scan.Error))
		}
		return append(locs, dup, locs[7]) // id 6 again, moved (it wins the lookup); id 7 again, unchanged
	})
	res, err := Scan(context.Background(), Config{Root: root, VHostDirs: []string{dir}}, scan.Options{Jobs: 2})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	kinds := map[string]bool{}
	for _, f := range codes(res.Findings, CodeIndexMismatch) {
		if f.Path != scan.Rel(root, ixPath) { // the scan's own: at the .rdq place
			got = append(got, fmt.Sprintf("%s %s@%d %v", f.MsgID, filepath.Base(f.Path), f.Offset, f.Severity))
			kinds[strings.SplitN(f.Actual, " ", 2)[0]] = true // "record ..." or "no ..."
		}
	}
	sort.Strings(got)
	sort.Strings(want)
	if strings.Join(got, "\n") != strings.Join(want, "\n") || !kinds["record"] || !kinds["no"] {
		t.Errorf("index findings at the files:\n%s\nwant one per damaged entry:\n%s\n(actual kinds %v)", strings.Join(got, "\n"), strings.Join(want, "\n"), kinds)
	}
	t.Logf("%d index.mismatch at the files, one per damaged entry", len(got))
}
