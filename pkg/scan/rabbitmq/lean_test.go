package rabbitmq

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	gen "github.com/storectl/storectl/internal/gen/rabbitmq"
	"github.com/storectl/storectl/internal/testutil"
	"github.com/storectl/storectl/pkg/scan"
)

// fullScan is Scan without lean mode: ScanVHost's detailed result turned
// into a scan.Result the way Scan does it.
func fullScan(t *testing.T, root, dir string, recs *[]any) *scan.Result {
	t.Helper()
	v, err := ScanVHost(context.Background(), root, dir, VHostOptions{Options: scan.Options{Jobs: 2,
		Records: func(r any) error { *recs = append(*recs, r); return nil }}})
	if err != nil {
		t.Fatal(err)
	}
	res := &scan.Result{Store: "rabbitmq", Layout: map[string]any{}}
	addFiles(res, v.Files)
	res.Add(v.Findings...)
	res.Layout["vhosts"] = []map[string]any{v.Layout}
	res.SortFindings()
	return res
}

// sameLean checks that Scan (lean mode) gives exactly the full-mode
// result: files, findings, layout and records.
func sameLean(t *testing.T, root, dir string) int {
	t.Helper()
	var wantRecs, gotRecs []any
	want := fullScan(t, root, dir, &wantRecs)
	got, err := Scan(context.Background(), Config{Root: root, VHostDirs: []string{dir}},
		scan.Options{Jobs: 2, Records: func(r any) error { gotRecs = append(gotRecs, r); return nil }})
	if err != nil {
		t.Fatal(err)
	}
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
