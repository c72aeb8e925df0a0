package rabbitmq

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/storectl/storectl/pkg/format/etf"

	gen "github.com/storectl/storectl/internal/gen/rabbitmq"
	rfmt "github.com/storectl/storectl/pkg/format/rabbitmq"
	"github.com/storectl/storectl/pkg/scan"
)

// TestDuplicateFirstCopy: copies of two referenced records A and B spread
// over three files, within a file and across files, get the first copy's
// path and offset (kept in the id table) in the records the per-file
// callback is handed and in Scan's duplicate findings alike.
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

	// Every record handed over, its status and first copy.
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

	// storectl scan: the duplicate findings.
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

// TestRecordsOfFileGone: a file walked again for its first copies gives
// the first copy's offset and size, and nothing (not a wrong answer) once
// the file can no longer be read.
func TestRecordsOfFileGone(t *testing.T) {
	dir := t.TempDir()
	recs, _ := realRecords(t)
	p := filepath.Join(dir, "0.rdq")
	writeFile(t, p, bytes.Join([][]byte{recs[0], recs[1], recs[0]}, nil))
	s := newScanner(dir, brokerVersion{}, scan.Options{})
	s.paths, s.abs, s.nums = []string{"0.rdq"}, []string{p}, []int64{0}
	var id0, id1 [16]byte
	copy(id0[:], recs[0][8:24])
	copy(id1[:], recs[1][8:24])
	m := s.recordsOf(1)
	if m[id0] != [2]int64{0, int64(len(recs[0]))} || m[id1] != [2]int64{int64(len(recs[0])), int64(len(recs[1]))} || len(m) != 2 {
		t.Fatalf("first copies %v", m)
	}
	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
	if m := s.recordsOf(1); len(m) != 0 || s.rewalks != 2 {
		t.Fatalf("deleted file: %v (%d walks)", m, s.rewalks)
	}
}

// TestFirstCopiesWalkEachFileOnce: the first copies the scan needs are
// found without walking a file once per record. Duplicates that alternate
// between two earlier files take no walk at all (the id table has the
// first copy's offset) and are reported as duplicates of those copies, and
// a clean-shutdown index whose every entry is off by one byte, in shuffled
// order (an index older than a compaction), walks each file at most once
// for the sizes of the first copies and names every entry's record.
func TestFirstCopiesWalkEachFileOnce(t *testing.T) {
	root := t.TempDir()
	sum, err := gen.Generate(root, gen.Config{Seed: 7, Kind: gen.MC, TotalBytes: 12 << 20, FileLimit: 2 << 20})
	if err != nil {
		t.Fatal(err)
	}
	dir := sum.VHostDir
	store := filepath.Join(dir, "msg_store_persistent")
	v := scanKeep(t, root, dir, VHostOptions{})
	// A last file of copies alternating between files 0 and 1.
	a, b := v.Files[0], v.Files[1]
	ab, bb := readFile(t, a.Abs), readFile(t, b.Abs)
	var dups []byte
	n := 0
	wantFirst := map[int64]*Record{} // 99.rdq offset -> the copy it duplicates
	for i := 0; i < len(a.Records) && i < len(b.Records); i++ {
		for _, r := range []*Record{a.Records[i], b.Records[i]} {
			wantFirst[int64(len(dups))] = r
			src := ab
			if r == b.Records[i] {
				src = bb
			}
			dups = append(dups, src[r.Offset:r.End()]...)
			n++
		}
	}
	writeFile(t, filepath.Join(store, "99.rdq"), dups)
	lv, s, err := scanVHostKeep(context.Background(), root, dir, VHostOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s.free()
	if s.rewalks != 0 {
		t.Errorf("%d alternating duplicates: %d files walked again, want 0", n, s.rewalks)
	}
	got := 0
	for _, f := range codes(lv.Findings, CodeDuplicate) {
		w := wantFirst[f.Offset]
		if !strings.HasSuffix(f.Path, "/99.rdq") || w == nil || f.Details["first_path"] != w.Path || f.Details["first_offset"] != w.Offset {
			t.Errorf("duplicate finding %s@%d: %v", f.Path, f.Offset, f.Details)
		}
		got++
	}
	if got != n {
		t.Errorf("%d duplicate findings, %d copies written", got, n)
	}

	// A stale index: every entry one byte off, in shuffled order.
	var locs []rfmt.MsgLocation
	var sums []rfmt.FileSummary
	for _, f := range v.Files {
		if f.Transient {
			continue
		}
		valid := int64(0)
		for _, r := range f.Records {
			locs = append(locs, rfmt.MsgLocation{MsgID: r.MsgID, RefCount: int64(len(r.ReferencedBy)), File: r.File,
				Offset: r.Offset + 1, TotalSize: r.TotalSize})
			if r.Status == StatusReferenced {
				valid += r.TotalSize
			}
		}
		sums = append(sums, rfmt.FileSummary{File: f.Number, ValidTotalSize: valid, FileSize: f.Size,
			Left: etf.Atom("undefined"), Right: etf.Atom("undefined"), Readers: etf.Atom("undefined")})
	}
	rng := rand.New(rand.NewPCG(1, 2))
	rng.Shuffle(len(locs), func(i, j int) { locs[i], locs[j] = locs[j], locs[i] })
	enc, err := rfmt.EncodeMsgStoreIndex(locs, rfmt.ETSEncodeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(store, "msg_store_index.ets"), enc)
	fb, err := rfmt.EncodeFileSummary(sums, rfmt.ETSEncodeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(store, "file_summary.ets"), fb)
	writeFile(t, filepath.Join(store, "clean.dot"), []byte("{client_refs,[]}.\n{index_module,rabbit_msg_store_ets_index}.\n"))
	lv, s, err = scanVHostKeep(context.Background(), root, dir, VHostOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.free()
	cs := readCleanState(root, store)
	if !cs.leanIndex {
		t.Fatalf("state %s: %v", cs.state, cs.from)
	}
	before := s.rewalks
	found := 0
	for _, f := range s.cleanIndexFindingsLean(lv, cs) {
		if _, ok := f.Details["found_at"]; ok {
			found++
		}
	}
	files := len(v.Files)
	if walks := s.rewalks - before; walks > files || found != len(locs) {
		t.Errorf("%d stale entries: %d files walked again for %d files, %d first copies found", len(locs), walks, files, found)
	}
	t.Logf("%d duplicates: 0 walks; %d stale entries: %d walks over %d files, %d found_at", n, len(locs), s.rewalks-before, files, found)
}
