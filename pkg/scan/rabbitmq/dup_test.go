package rabbitmq

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/storectl/storectl/pkg/scan"
)

// TestDuplicateFirstCopy: the id table keeps only which file holds an id's
// first copy, so a duplicate's first offset is found again (in its own
// file's records, or by walking the earlier file once more). Copies of two
// referenced records A and B spread over three files, within a file and
// across files, in an order that switches the cached file back and forth,
// get the first copy's path and offset in the detailed scan's records and
// in the lean scan's duplicate findings alike.
func TestDuplicateFirstCopy(t *testing.T) {
	recs, _ := realRecords(t)
	a, b := recs[0], recs[1]
	root, vdir, _, offs := writeVHost(t, []part{{rec: a}, {hole: 5}, {rec: b}, {rec: a}})
	store := filepath.Join(vdir, "msg_store_persistent")
	writeFile(t, filepath.Join(store, "1.rdq"), bytes.Join([][]byte{b, a, b}, nil))
	writeFile(t, filepath.Join(store, "2.rdq"), bytes.Join([][]byte{a, a, b}, nil))
	p0 := scan.Rel(root, filepath.Join(store, "0.rdq"))
	p1 := scan.Rel(root, filepath.Join(store, "1.rdq"))
	p2 := scan.Rel(root, filepath.Join(store, "2.rdq"))
	first := map[string]int64{} // path@offset of each copy -> first copy's offset in 0.rdq
	want := []struct {
		path string
		off  int64
		of   int64
	}{
		{p0, offs[2], offs[0]}, // A again in 0.rdq
		{p1, 0, offs[1]},       // B
		{p1, int64(len(b)), offs[0]},
		{p1, int64(len(b) + len(a)), offs[1]},
		{p2, 0, offs[0]},
		{p2, int64(len(a)), offs[0]},
		{p2, int64(2 * len(a)), offs[1]},
	}
	for _, w := range want {
		first[fmt.Sprintf("%s@%d", w.path, w.off)] = w.of
	}

	// Detailed: every record, its status and first copy.
	s := scanVHostDir(t, root, vdir, "")
	dups := 0
	for _, n := range []int64{0, 1, 2} {
		for _, r := range s.file(n).Records {
			k := fmt.Sprintf("%s@%d", r.Path, r.Offset)
			of, isDup := first[k]
			if (r.Status == StatusDuplicate) != isDup {
				t.Errorf("%s: status %s, duplicate %v", k, r.Status, isDup)
				continue
			}
			if isDup {
				dups++
				if r.FirstPath != p0 || r.FirstOffset != of {
					t.Errorf("%s: first copy %s@%d, want %s@%d", k, r.FirstPath, r.FirstOffset, p0, of)
				}
			}
		}
	}
	if dups != len(want) {
		t.Errorf("%d duplicates, want %d", dups, len(want))
	}

	// Lean (storectl scan): the duplicate findings.
	res, err := Scan(context.Background(), Config{Root: root, VHostDirs: []string{vdir}}, scan.Options{Jobs: 2})
	if err != nil {
		t.Fatal(err)
	}
	dups = 0
	for _, f := range res.Findings {
		if f.Code != CodeDuplicate {
			continue
		}
		dups++
		k := fmt.Sprintf("%s@%d", f.Path, f.Offset)
		of, ok := first[k]
		if !ok || f.Details["first_path"] != p0 || f.Details["first_offset"] != of {
			t.Errorf("lean finding %s: details %v, want first %s@%d", k, f.Details, p0, of)
		}
		if wantMsg := fmt.Sprintf("duplicate of the record at %s@%d; the first copy is authoritative", p0, of); f.Message != wantMsg {
			t.Errorf("lean finding %s: %q", k, f.Message)
		}
	}
	if dups != len(want) {
		t.Errorf("lean scan: %d duplicate findings, want %d", dups, len(want))
	}
}

// TestFirstOffsetFileGone: a first copy whose file can no longer be read
// (it changed after it was scanned) gets offset -1, not a wrong one.
func TestFirstOffsetFileGone(t *testing.T) {
	dir := t.TempDir()
	recs, _ := realRecords(t)
	p := filepath.Join(dir, "0.rdq")
	writeFile(t, p, recs[0])
	s := newScanner(dir, brokerVersion{}, scan.Options{})
	s.paths, s.abs, s.nums = []string{"0.rdq", "1.rdq"}, []string{p, filepath.Join(dir, "1.rdq")}, []int64{0, 1}
	var id [16]byte
	copy(id[:], recs[0][8:24])
	cur := &FileScan{}
	if got := firstOff(s, 1, 2, cur, id); got != 0 {
		t.Fatalf("first copy in 0.rdq at %d, want 0", got)
	}
	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
	s.firstIn.off = nil // forget the cached walk
	if got := firstOff(s, 1, 2, cur, id); got != -1 {
		t.Fatalf("deleted file: first copy at %d, want -1", got)
	}
	var other [16]byte
	if got := firstOff(s, 2, 2, cur, other); got != -1 {
		t.Fatalf("id not in the current file: %d, want -1", got)
	}
}

func firstOff(s *scanner, p, pi int32, fs *FileScan, id [16]byte) int64 {
	off, _ := s.firstRecord(p, pi, fs, id)
	return off
}
