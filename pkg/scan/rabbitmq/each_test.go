package rabbitmq

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"testing"

	"github.com/storectl/storectl/internal/testutil"
	"github.com/storectl/storectl/pkg/scan"
)

// eachFileView is what a per-file callback sees of one file, in a form
// that compares as JSON.
type eachFileView struct {
	Path       string
	Transient  bool
	Records    []Record
	Gaps       []Gap
	Hazards    int
	BadMarkers []int64
	Short      []int64
}

func viewOf(f *FileScan) eachFileView {
	v := eachFileView{Path: f.Path, Transient: f.Transient, Gaps: f.Gaps, Hazards: len(f.Hazards), BadMarkers: f.BadMarkers, Short: f.ShortFrames}
	for _, r := range f.Records {
		v.Records = append(v.Records, *r)
	}
	return v
}

// sameEachFile checks that ScanVHost with a per-file callback hands over,
// file by file in order, exactly the records, gaps and hazards of the
// detailed result, and reports the same files and findings.
func sameEachFile(t *testing.T, root, dir string) int {
	t.Helper()
	want, err := ScanVHost(context.Background(), root, dir, VHostOptions{Options: scan.Options{Jobs: 2}})
	if err != nil {
		t.Fatal(err)
	}
	var got []eachFileView
	v, err := ScanVHost(context.Background(), root, dir, VHostOptions{Options: scan.Options{Jobs: 2},
		EachFile: func(v *VHostScan, f *FileScan) error {
			if v.Files != nil && !f.Transient {
				t.Errorf("%s: v.Files is set during the persistent store's scan", f.Path)
			}
			got = append(got, viewOf(f))
			return nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	var wantViews []eachFileView
	records := 0
	for _, f := range want.Files {
		wantViews = append(wantViews, viewOf(f))
		records += len(f.Records)
	}
	a, _ := json.Marshal(wantViews)
	b, _ := json.Marshal(got)
	if string(a) != string(b) {
		t.Errorf("files handed over differ from the detailed scan's:\ndetailed %.2000s\nhanded   %.2000s", a, b)
	}
	for _, f := range v.Files {
		if f.Records != nil || f.Gaps != nil {
			t.Errorf("%s: records kept after they were handed over", f.Path)
		}
	}
	fa, _ := json.Marshal(want.Findings)
	fb, _ := json.Marshal(v.Findings)
	if string(fa) != string(fb) {
		t.Errorf("findings differ:\ndetailed %.2000s\nhanded   %.2000s", fa, fb)
	}
	if records == 0 || len(want.Findings) == 0 {
		t.Errorf("nothing compared: %d records, %d findings", records, len(want.Findings))
	}
	return records
}

// TestEachFileSameAsDetailed: on every fixture dataset and a generated
// store with a deleted file, the records that ScanVHost's per-file
// callback gets are the detailed scan's, and so are the findings.
func TestEachFileSameAsDetailed(t *testing.T) {
	for _, d := range datasets {
		t.Run(d.kind+"/"+d.name, func(t *testing.T) {
			root := testutil.Untar(t, testutil.Testdata(d.kind, "datasets", d.name+".tar.gz"))
			n := sameEachFile(t, root, filepath.Join(root, d.node, "msg_stores", "vhosts", vhostHash))
			t.Logf("%d records compared", n)
		})
	}
	t.Run("generated", func(t *testing.T) {
		root, dir := genDeletedFile(t)
		t.Logf("%d records compared", sameEachFile(t, root, dir))
	})
}

// TestEachFileErrorStops: an error of the callback ends the scan with it,
// and no file after it is handed over.
func TestEachFileErrorStops(t *testing.T) {
	root, dir := genDeletedFile(t)
	stop := errors.New("stop here")
	n := 0
	_, err := ScanVHost(context.Background(), root, dir, VHostOptions{Options: scan.Options{Jobs: 2},
		EachFile: func(*VHostScan, *FileScan) error {
			n++
			if n == 2 {
				return stop
			}
			return nil
		}})
	if !errors.Is(err, stop) {
		t.Fatalf("error %v, want %v", err, stop)
	}
	if n != 2 {
		t.Errorf("%d files handed over, want 2 (none after the error)", n)
	}
}

// TestQueuesOfAfterEachFile: a scan that handed its records over answers
// QueuesOf as the detailed scan's Refs do, for referenced ids (one name
// per reference) and for ids no queue references.
func TestQueuesOfAfterEachFile(t *testing.T) {
	for _, d := range datasets {
		t.Run(d.kind+"/"+d.name, func(t *testing.T) {
			root := testutil.Untar(t, testutil.Testdata(d.kind, "datasets", d.name+".tar.gz"))
			dir := filepath.Join(root, d.node, "msg_stores", "vhosts", vhostHash)
			want, err := ScanVHost(context.Background(), root, dir, VHostOptions{})
			if err != nil {
				t.Fatal(err)
			}
			got, err := ScanVHost(context.Background(), root, dir, VHostOptions{EachFile: func(*VHostScan, *FileScan) error { return nil }})
			if err != nil {
				t.Fatal(err)
			}
			ids := []string{"00000000000000000000000000000000"}
			for id := range want.Refs {
				if ids = append(ids, id); len(ids) > 20 {
					break
				}
			}
			multi := 0
			for _, id := range ids {
				qs, err := got.QueuesOf(id)
				if err != nil {
					t.Fatal(err)
				}
				w, _ := json.Marshal(want.Refs[id])
				g, _ := json.Marshal(qs)
				if len(qs) != len(want.Refs[id]) || (len(qs) > 0 && string(w) != string(g)) {
					t.Errorf("QueuesOf(%s) = %s, detailed Refs %s", id, g, w)
				}
				if len(qs) > 1 {
					multi++
				}
			}
			t.Logf("%d ids compared, %d referenced more than once", len(ids), multi)
		})
	}
}
