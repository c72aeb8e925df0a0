package rabbitmq

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	gen "github.com/storectl/storectl/internal/gen/rabbitmq"
	"github.com/storectl/storectl/internal/testutil"
	rfmt "github.com/storectl/storectl/pkg/format/rabbitmq"
	"github.com/storectl/storectl/pkg/scan"
)

// scanWith runs Scan on one vhost dir with lean mode on or off (off:
// ScanVHost's detailed result, assembled by Scan itself).
func scanWith(t *testing.T, lean bool, root, dir string, recs *[]any) *scan.Result {
	t.Helper()
	opts := scan.Options{Jobs: 2}
	if recs != nil { // else no record callback: the lean scan may use the index digest
		opts.Records = func(r any) error { *recs = append(*recs, r); return nil }
	}
	res, err := Scan(context.Background(), Config{Root: root, VHostDirs: []string{dir}, detailed: !lean}, opts)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// sameLean checks that Scan (lean mode) gives exactly the full-mode
// result: files, findings, layout and records.
func sameLean(t *testing.T, root, dir string) int {
	t.Helper()
	var wantRecs, gotRecs []any
	want := scanWith(t, false, root, dir, &wantRecs)
	got := scanWith(t, true, root, dir, &gotRecs)
	a, _ := json.Marshal([]any{want, wantRecs})
	b, _ := json.Marshal([]any{got, gotRecs})
	if string(a) != string(b) {
		t.Errorf("lean Scan differs from the full scan:\nfull %.2000s\nlean %.2000s", a, b)
	}
	if len(want.Findings) == 0 || len(wantRecs) == 0 {
		t.Errorf("nothing compared: %d findings, %d records", len(want.Findings), len(wantRecs))
	}
	return len(want.Findings)
}

// TestLeanScanSameAsFull: on every fixture dataset and on a generated
// store with holes, unreferenced records and a deleted file (message-missing
// findings), Scan's lean mode reports exactly what the detailed scan does.
func TestLeanScanSameAsFull(t *testing.T) {
	defer spillAll()()
	for _, d := range datasets {
		t.Run(d.kind+"/"+d.name, func(t *testing.T) {
			root := testutil.Untar(t, testutil.Testdata(d.kind, "datasets", d.name+".tar.gz"))
			n := sameLean(t, root, filepath.Join(root, d.node, "msg_stores", "vhosts", vhostHash))
			t.Logf("%d findings compared", n)
		})
	}
	t.Run("generated", func(t *testing.T) {
		root, dir := genDeletedFile(t)
		n := sameLean(t, root, dir)
		res, _ := Scan(context.Background(), Config{Root: root, VHostDirs: []string{dir}}, scan.Options{})
		lost := len(codes(res.Findings, CodeMessageMissing))
		if lost == 0 {
			t.Error("no message-missing finding: the deleted file was not noticed")
		}
		t.Logf("%d findings compared, %d message-missing", n, lost)
	})
}

// genDeletedFile generates an mc store with holes and unreferenced
// records, deletes its second .rdq (message-missing findings) and returns
// root and the vhost dir.
func genDeletedFile(t *testing.T) (root, dir string) {
	t.Helper()
	root = t.TempDir()
	sum, err := gen.Generate(root, gen.Config{Seed: 3, Kind: gen.MC, TotalBytes: 6 << 20, FileLimit: 1 << 20,
		HoleEvery: 7, UnrefEvery: 5})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(sum.Files[1]); err != nil {
		t.Fatal(err)
	}
	return root, sum.VHostDir
}

// TestLeanScanCleanIndexDamage: with a damaged msg_store_index.ets (the
// 3.10 clean-shutdown dump re-encoded with entries moved within their
// file, onto another record, into a file that does not exist, to one
// place twice, with a ref count of 0, and an id given twice so the later
// entry wins the per-record lookup), lean Scan, which checks the dump file
// by file without keeping the records, reports exactly what the detailed
// scan does, and every kind of damage shows.
func TestLeanScanCleanIndexDamage(t *testing.T) {
	root, dir := unpack(t, "clean-shutdown")
	ixPath := filepath.Join(dir, "msg_store_persistent", "msg_store_index.ets")
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
		if a < 0 {
			t.Fatal("no two entries in one file")
		}
		locs[b].Offset = locs[a].Offset // onto another record
		locs[2].Offset += 9             // inside its record: nothing starts there
		locs[3].File = 9999             // a file that does not exist
		locs[4].File, locs[4].Offset = locs[a].File, locs[a].Offset
		locs[5].RefCount, locs[5].Offset = 0, locs[5].Offset+1
		dup := locs[6]
		dup.Offset += 3
		return append(locs, dup, locs[7]) // id 6 again, moved (it wins the lookup); id 7 again, unchanged
	})
	n := sameLean(t, root, dir)
	res, err := Scan(context.Background(), Config{Root: root, VHostDirs: []string{dir}}, scan.Options{Jobs: 2})
	if err != nil {
		t.Fatal(err)
	}
	var actual []string
	warn := 0
	for _, f := range codes(res.Findings, CodeIndexMismatch) {
		if f.Path != scan.Rel(root, ixPath) { // the scan's own: at the .rdq place
			actual = append(actual, f.Actual)
			if f.Severity == scan.Warning {
				warn++
			}
		}
	}
	kinds := map[string]bool{}
	for _, s := range actual {
		kinds[strings.SplitN(s, " ", 2)[0]] = true // "record ..." or "no ..."
	}
	if !kinds["record"] || !kinds["no"] || warn == 0 || len(actual) < 6 {
		t.Errorf("index findings %v (%d warnings): not every kind of damage shows", actual, warn)
	}
	t.Logf("%d findings compared, %d index.mismatch at the files (%d warnings)", n, len(actual), warn)
}

// TestUnreferencedOnePerFile: a file's unreferenced records are one
// finding (records, bytes, first and last, the span as offset and
// length) whose sums are those of the record lines with status
// unreferenced, in the lean and the detailed scan.
func TestUnreferencedOnePerFile(t *testing.T) {
	root, dir := genDeletedFile(t)
	for _, lean := range []bool{true, false} {
		var recs []any
		res := scanWith(t, lean, root, dir, &recs)
		type sum struct {
			n                  int
			bytes, first, last int64
			firstID, lastID    string
		}
		want := map[string]*sum{}
		for _, r := range recs {
			rj := r.(RecordJSON)
			if rj.Status != StatusUnreferenced {
				continue
			}
			s := want[rj.Path]
			if s == nil {
				s = &sum{first: rj.Offset, firstID: rj.MsgID}
				want[rj.Path] = s
			}
			s.n++
			s.bytes += rj.Size
			s.last, s.lastID = rj.Offset, rj.MsgID
		}
		got := 0
		for _, f := range codes(res.Findings, CodeUnreferenced) {
			got++
			s := want[f.Path]
			d := f.Details
			if s == nil || d["records"] != s.n || d["bytes"] != s.bytes || f.Offset != s.first || d["first_offset"] != s.first ||
				d["last_offset"] != s.last || d["first_msg_id"] != s.firstID || d["last_msg_id"] != s.lastID ||
				f.Length < s.last-s.first || (s.n == 1) != (f.MsgID != "") {
				t.Errorf("lean %v: %s: finding %+v, records %+v", lean, f.Path, f, s)
			}
		}
		if got != len(want) || got < 2 {
			t.Errorf("lean %v: %d unreferenced findings, %d files with unreferenced records", lean, got, len(want))
		}
		t.Logf("lean %v: %d files' unreferenced records in one finding each", lean, got)
	}
}
