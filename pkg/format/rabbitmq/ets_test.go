package rabbitmq

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"testing"

	"github.com/storectl/storectl/internal/testutil"
	"github.com/storectl/storectl/pkg/format"
	"github.com/storectl/storectl/pkg/format/etf"
)

// etsFixtures are the clean-shutdown datasets that hold .ets dumps.
var etsFixtures = []struct {
	fixture, node string
	atoms         etf.AtomEncoding
	index, files  int // object counts, from the README / tar listing
}{
	{"rabbitmq", "rmqfix@localhost", etf.AtomsLatin1, 176, 29},
	{"rabbitmq-4.0", "rmq40@localhost", etf.AtomsUTF8, 423, 45},
}

func etsStoreDir(t *testing.T, fixture, node string) string {
	root := rdqDataset(t, fixture, "datasets", "clean-shutdown.tar.gz")
	return filepath.Join(rdqVhostDir(root, node), "msg_store_persistent")
}

func etsRead(t *testing.T, dir, name string) []byte {
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestETSAgainstScanOracle checks every index entry against the scanner
// oracle's records (same id, file, offset, total size) and every summary
// against the .rdq sizes and the index.
func TestETSAgainstScanOracle(t *testing.T) {
	for _, fx := range etsFixtures {
		dir := etsStoreDir(t, fx.fixture, fx.node)
		locs, err := ReadMsgStoreIndex(etsRead(t, dir, "msg_store_index.ets"))
		if err != nil {
			t.Fatal(err)
		}
		sums, err := ReadFileSummary(etsRead(t, dir, "file_summary.ets"))
		if err != nil {
			t.Fatal(err)
		}
		if len(locs) != fx.index || len(sums) != fx.files {
			t.Fatalf("%s: %d locations, %d summaries", fx.fixture, len(locs), len(sums))
		}
		scan := map[string]rdqOracleRecord{} // "file/offset" -> record
		for _, s := range sums {
			name := "msg_store_persistent-" + itoa(s.File) + ".rdq.jsonl"
			for _, r := range testutil.ReadJSONL[rdqOracleRecord](t, testutil.Testdata(fx.fixture, "results", "clean-shutdown", "scan", name)) {
				scan[itoa(s.File)+"/"+itoa(r.Offset)] = r
			}
			fi, err := os.Stat(filepath.Join(dir, itoa(s.File)+".rdq"))
			if err != nil || fi.Size() != s.FileSize {
				t.Errorf("%s: file %d: summary size %d, on disk %v %v", fx.fixture, s.File, s.FileSize, fi.Size(), err)
			}
		}
		valid := map[int64]int64{}
		for _, l := range locs {
			r, ok := scan[itoa(l.File)+"/"+itoa(l.Offset)]
			if !ok || r.MsgID != hex.EncodeToString(l.MsgID[:]) || r.TotalSize != l.TotalSize {
				t.Errorf("%s: %+v not in scan oracle (%+v)", fx.fixture, l, r)
			}
			if l.RefCount > 0 {
				valid[l.File] += l.TotalSize
			}
		}
		for _, s := range sums {
			if s.ValidTotalSize != valid[s.File] {
				t.Errorf("%s: file %d valid_total_size %d, index says %d", fx.fixture, s.File, s.ValidTotalSize, valid[s.File])
			}
		}
		if len(scan) != fx.index {
			t.Errorf("%s: oracle has %d records, index %d", fx.fixture, len(scan), fx.index)
		}
	}
}

func itoa(v int64) string { return strconv.FormatInt(v, 10) }

// TestETSRoundTrip re-encodes the real dumps from their decoded objects
// with the file's own info tuple and compares bytes.
func TestETSRoundTrip(t *testing.T) {
	for _, fx := range etsFixtures {
		dir := etsStoreDir(t, fx.fixture, fx.node)
		for _, name := range []string{"msg_store_index.ets", "file_summary.ets"} {
			orig := etsRead(t, dir, name)
			f, err := ReadETSFile(orig)
			if err != nil {
				t.Fatal(err)
			}
			o := ETSEncodeOptions{Info: f.Info, Atoms: fx.atoms}
			var got []byte
			if name == "file_summary.ets" {
				sums, _ := ReadFileSummary(orig)
				got, err = EncodeFileSummary(sums, o)
			} else {
				locs, _ := ReadMsgStoreIndex(orig)
				got, err = EncodeMsgStoreIndex(locs, o)
			}
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, orig) {
				i := 0
				for i < len(got) && i < len(orig) && got[i] == orig[i] {
					i++
				}
				t.Errorf("%s/%s: re-encoded %d bytes, original %d, first difference at %d", fx.fixture, name, len(got), len(orig), i)
			}
			// A built info (no template) still decodes to the same objects.
			o.Info = nil
			var rebuilt []byte
			if name == "file_summary.ets" {
				sums, _ := ReadFileSummary(orig)
				rebuilt, _ = EncodeFileSummary(sums, o)
				again, err := ReadFileSummary(rebuilt)
				if err != nil || !reflect.DeepEqual(again, sums) {
					t.Errorf("%s/%s: built-info round trip: %v", fx.fixture, name, err)
				}
			} else {
				locs, _ := ReadMsgStoreIndex(orig)
				rebuilt, _ = EncodeMsgStoreIndex(locs, o)
				again, err := ReadMsgStoreIndex(rebuilt)
				if err != nil || !reflect.DeepEqual(again, locs) {
					t.Errorf("%s/%s: built-info round trip: %v", fx.fixture, name, err)
				}
			}
			g, _ := ReadETSFile(rebuilt)
			if reflect.TypeOf(g.Info) != reflect.TypeOf(f.Info) || len(g.Info.(etf.Tuple)) != len(f.Info.(etf.Tuple)) {
				t.Errorf("%s/%s: built info has another shape", fx.fixture, name)
			}
			for i, kv := range f.Info.(etf.Tuple) {
				if kv.(etf.Tuple)[0] != g.Info.(etf.Tuple)[i].(etf.Tuple)[0] {
					t.Errorf("%s/%s: info key %d = %v, want %v", fx.fixture, name, i, g.Info.(etf.Tuple)[i].(etf.Tuple)[0], kv.(etf.Tuple)[0])
				}
			}
		}
	}
}

func TestReadETSErrors(t *testing.T) {
	good, err := EncodeMsgStoreIndex([]MsgLocation{{MsgID: [16]byte{1}, RefCount: 1, File: 3, Offset: 0, TotalSize: 100}}, ETSEncodeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name      string
		mutate    func([]byte) []byte
		wantField string
		wantOff   int64
		wantErr   error
	}{
		{"log magic", func(b []byte) []byte { b[0] = 9; return b }, "logMagic", 0, format.ErrMagic},
		{"status", func(b []byte) []byte { b[4] = 9; return b }, "status", 4, format.ErrMagic},
		{"item magic", func(b []byte) []byte { b[12] = 0; return b }, "itemMagic", 12, format.ErrMagic},
		{"item too large", func(b []byte) []byte { b[8] = 0x7f; return b }, "itemSize", 8, format.ErrTooLarge},
		{"torn", func(b []byte) []byte { return b[:len(b)-3] }, "item", -1, format.ErrShort},
		{"not a term", func(b []byte) []byte { b[16] = 0; return b }, "version", 16, format.ErrMagic},
	}
	for _, tt := range tests {
		b := tt.mutate(append([]byte(nil), good...))
		_, err := ReadMsgStoreIndex(b)
		var ce *format.CorruptError
		if !errors.As(err, &ce) || !errors.Is(err, tt.wantErr) || ce.Field != tt.wantField || (tt.wantOff >= 0 && ce.Offset != tt.wantOff) {
			t.Errorf("%s: err = %v", tt.name, err)
		}
	}
	if _, err := ReadFileSummary(good); err == nil {
		t.Error("index dump accepted as file summary")
	}
	f, _ := ReadETSFile(good)
	if !f.Closed || f.Count != 1 {
		t.Errorf("closed %v count %d", f.Closed, f.Count)
	}
}

func FuzzDiskLog(f *testing.F) {
	for _, fx := range etsFixtures {
		root := testutil.Untar(f, testutil.Testdata(fx.fixture, "datasets", "clean-shutdown.tar.gz"))
		dir := filepath.Join(rdqVhostDir(root, fx.node), "msg_store_persistent")
		for _, name := range []string{"file_summary.ets", "msg_store_index.ets"} {
			b, err := os.ReadFile(filepath.Join(dir, name))
			if err != nil {
				f.Fatal(err)
			}
			// Seeds are cut to the info item plus 4 objects: with the whole
			// 11-25 KB dumps the fuzz workers stalled after ~15 execs here
			// (go1.26, loaded machine); the cut keeps every item kind.
			f.Add(etsFuzzSeed(b, fx.atoms))
		}
	}
	small, _ := EncodeFileSummary([]FileSummary{{File: 1, ValidTotalSize: 10, FileSize: 20}}, ETSEncodeOptions{})
	f.Add(small)
	idx, _ := EncodeMsgStoreIndex([]MsgLocation{{MsgID: [16]byte{1}, RefCount: 1, File: 3, TotalSize: 100}}, ETSEncodeOptions{Atoms: etf.AtomsUTF8})
	f.Add(idx)
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, fn := range []func([]byte) error{
			func(b []byte) error { _, err := ReadMsgStoreIndex(b); return err },
			func(b []byte) error { _, err := ReadFileSummary(b); return err },
		} {
			if err := fn(b); err != nil {
				var ce *format.CorruptError
				if !errors.As(err, &ce) || ce.Offset < 0 || ce.Offset > int64(len(b)) {
					t.Fatalf("bad error %v", err)
				}
			}
		}
	})
}

// etsFuzzSeed re-encodes the dump with its own info tuple and only its
// first 4 objects (a valid file with every item kind).
func etsFuzzSeed(b []byte, atoms etf.AtomEncoding) []byte {
	f, err := ReadETSFile(b)
	if err != nil {
		return b
	}
	o := ETSEncodeOptions{Info: f.Info, Atoms: atoms}
	if locs, err := ReadMsgStoreIndex(b); err == nil {
		out, _ := EncodeMsgStoreIndex(locs[:min(4, len(locs))], o)
		return out
	}
	sums, _ := ReadFileSummary(b)
	out, _ := EncodeFileSummary(sums[:min(4, len(sums))], o)
	return out
}

// checkSameAsRead asserts that CheckMsgStoreIndex says of b exactly what
// ReadETSFile + ReadMsgStoreIndex say: the same error, or the same closed
// flag and object count.
func checkSameAsRead(t *testing.T, b []byte) error {
	t.Helper()
	closed, n, err := CheckMsgStoreIndex(b, nil)
	locs, rerr := ReadMsgStoreIndex(b)
	if (err == nil) != (rerr == nil) || (err != nil && err.Error() != rerr.Error()) {
		t.Fatalf("CheckMsgStoreIndex: %v; ReadMsgStoreIndex: %v", err, rerr)
	}
	if err == nil {
		f, ferr := ReadETSFile(b)
		if ferr != nil || f.Closed != closed || n != len(locs) {
			t.Fatalf("closed %v, %d objects; ReadETSFile %v closed %v, %d locations", closed, n, ferr, f != nil && f.Closed, len(locs))
		}
	}
	return err
}

// TestCheckMsgStoreIndex: on both fixture dumps, on every error case of
// TestReadETSErrors and on dumps with a wrong object, a wrong table name,
// a wrong count, an end marker in the middle, an open log and a torn
// tail, the streaming check agrees with the full decoder.
func TestCheckMsgStoreIndex(t *testing.T) {
	var dumps [][]byte
	for _, fx := range etsFixtures {
		b := etsRead(t, etsStoreDir(t, fx.fixture, fx.node), "msg_store_index.ets")
		if err := checkSameAsRead(t, b); err != nil {
			t.Fatalf("%s: %v", fx.fixture, err)
		}
		// reached hears every item's offset, in two ascending passes.
		var offs []int64
		if _, n, _ := CheckMsgStoreIndex(b, func(off int64) { offs = append(offs, off) }); n != fx.index {
			t.Errorf("%s: %d objects, want %d", fx.fixture, n, fx.index)
		}
		items, _, _ := ReadETSItems(b)
		if len(offs) != 2*len(items) {
			t.Errorf("%s: reached told %d offsets, want 2 x %d items", fx.fixture, len(offs), len(items))
		} else if h := len(items); !slices.IsSorted(offs[:h]) || !slices.Equal(offs[:h], offs[h:]) || offs[h-1] >= int64(len(b)) {
			t.Errorf("%s: reached offsets are not two equal ascending passes within the file", fx.fixture)
		}
		dumps = append(dumps, b)
	}
	locs := []MsgLocation{{MsgID: [16]byte{1}, RefCount: 1, File: 3, TotalSize: 100}, {MsgID: [16]byte{2}, RefCount: 2, File: 4, Offset: 7, TotalSize: 30}}
	good, _ := EncodeMsgStoreIndex(locs, ETSEncodeOptions{})
	summary, _ := EncodeFileSummary([]FileSummary{{File: 1, ValidTotalSize: 10, FileSize: 20}}, ETSEncodeOptions{})
	named, _ := EncodeMsgStoreIndex(locs, ETSEncodeOptions{Info: etf.Tuple{etf.Tuple{etf.Atom("name"), etf.Atom("other_table")}}})
	// An index whose second object is a file_summary: the shape error.
	mixed := append([]byte(nil), good[:8]...)
	items, _, _ := ReadETSItems(good)
	sItems, _, _ := ReadETSItems(summary)
	mixed = etsAppendItem(etsAppendItem(etsAppendItem(mixed, items[0]), items[1]), sItems[1])
	endMid := etsAppendItem(etsAppendItem(etsAppendItem(append([]byte(nil), good[:8]...), items[0]), items[len(items)-1]), items[1])
	badCount := etsAppendItem(etsAppendItem(append([]byte(nil), good[:8]...), items[0]), items[1])
	badCount = etsAppendItem(badCount, items[len(items)-1]) // says 2, holds 1
	open := append([]byte(nil), good...)
	copy(open[4:], etsOpened)
	cases := map[string][]byte{"good": good, "summary": summary, "named": named, "mixed": mixed, "end-mid": endMid,
		"count": badCount, "open": open, "torn": good[:len(good)-3], "empty": nil, "header": good[:8]}
	for i, b := range dumps {
		cases["fixture-torn-"+strconv.Itoa(i)] = b[:len(b)*2/3]
		c := append([]byte(nil), b...)
		c[len(c)/2] ^= 0xFF
		cases["fixture-flip-"+strconv.Itoa(i)] = c
	}
	errs := 0
	for name, b := range cases {
		if err := checkSameAsRead(t, b); err != nil {
			errs++
			t.Logf("%s: %v", name, err)
		}
	}
	if errs < 7 {
		t.Errorf("only %d of %d cases fail: the error paths are not compared", errs, len(cases))
	}
}

// FuzzCheckMsgStoreIndex: on any input the streaming check agrees with
// the full decoder (the same error or the same verdict).
func FuzzCheckMsgStoreIndex(f *testing.F) {
	for _, fx := range etsFixtures {
		root := testutil.Untar(f, testutil.Testdata(fx.fixture, "datasets", "clean-shutdown.tar.gz"))
		b, err := os.ReadFile(filepath.Join(rdqVhostDir(root, fx.node), "msg_store_persistent", "msg_store_index.ets"))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(etsFuzzSeed(b, fx.atoms))
	}
	idx, _ := EncodeMsgStoreIndex([]MsgLocation{{MsgID: [16]byte{1}, RefCount: 1, File: 3, TotalSize: 100}}, ETSEncodeOptions{Atoms: etf.AtomsUTF8})
	f.Add(idx)
	f.Fuzz(func(t *testing.T, b []byte) { checkSameAsRead(t, b) })
}

// TestQuickMsgLocation: every object of both fixture dumps (3.10: latin1
// atoms, 4.0: UTF-8 atoms) takes the quick path and decodes as the full
// decoder decodes it; shapes outside it (a big integer, a 15-byte id, a
// trailing byte, another atom) are left to the full decoder.
func TestQuickMsgLocation(t *testing.T) {
	for _, fx := range etsFixtures {
		b := etsRead(t, etsStoreDir(t, fx.fixture, fx.node), "msg_store_index.ets")
		items, _, err := ReadETSItems(b)
		if err != nil {
			t.Fatal(err)
		}
		quick := 0
		for _, it := range items[1:] {
			full, err := etf.DecodeExactTerm(it)
			if err != nil {
				t.Fatal(err)
			}
			want, isLoc := msgLocation(full)
			got, ok := QuickMsgLocation(it)
			if ok {
				quick++
				if !isLoc || got != want {
					t.Fatalf("%s: quick %+v, full %+v (%v)", fx.fixture, got, want, isLoc)
				}
			}
		}
		if quick != fx.index {
			t.Errorf("%s: %d of %d objects took the quick path", fx.fixture, quick, fx.index)
		}
	}
	one, _ := EncodeMsgStoreIndex([]MsgLocation{{MsgID: [16]byte{7}, RefCount: 3, File: 300, Offset: 1 << 20, TotalSize: 70}}, ETSEncodeOptions{})
	items, _, _ := ReadETSItems(one)
	good := items[1]
	if l, ok := QuickMsgLocation(good); !ok || l.File != 300 || l.Offset != 1<<20 || l.RefCount != 3 {
		t.Fatalf("quick %+v %v", l, ok)
	}
	big, _ := EncodeMsgStoreIndex([]MsgLocation{{MsgID: [16]byte{7}, RefCount: 3, File: 300, Offset: 1 << 40, TotalSize: 70}}, ETSEncodeOptions{})
	bigItems, _, _ := ReadETSItems(big)
	for name, b := range map[string][]byte{
		"big offset": bigItems[1],
		"trailing":   append(append([]byte(nil), good...), 0),
		"short":      good[:len(good)-1],
		"other atom": bytes.Replace(good, []byte("msg_location"), []byte("msg_locatiom"), 1),
		"15-byte id": append(append(append([]byte(nil), good[:18]...), 0, 0, 0, 15), good[22:]...),
	} {
		if l, ok := QuickMsgLocation(b); ok {
			t.Errorf("%s: quick path took it: %+v", name, l)
		}
	}
}

// FuzzQuickMsgLocation: whatever the quick path accepts, the full decoder
// decodes to the same location.
func FuzzQuickMsgLocation(f *testing.F) {
	one, _ := EncodeMsgStoreIndex([]MsgLocation{{MsgID: [16]byte{7}, RefCount: 3, File: 300, Offset: 1 << 20, TotalSize: 70}}, ETSEncodeOptions{Atoms: etf.AtomsUTF8})
	items, _, _ := ReadETSItems(one)
	f.Add(items[1])
	latin, _ := EncodeMsgStoreIndex([]MsgLocation{{MsgID: [16]byte{1}, RefCount: 1, TotalSize: 30}}, ETSEncodeOptions{})
	items, _, _ = ReadETSItems(latin)
	f.Add(items[1])
	f.Fuzz(func(t *testing.T, b []byte) {
		l, ok := QuickMsgLocation(b)
		if !ok {
			return
		}
		full, err := etf.DecodeExactTerm(b)
		if err != nil {
			t.Fatalf("quick %+v, full decoder: %v", l, err)
		}
		if want, isLoc := msgLocation(full); !isLoc || want != l {
			t.Fatalf("quick %+v, full %+v (%v)", l, want, isLoc)
		}
	})
}

// readMsgStoreIndexTerms is ReadMsgStoreIndex as it was, from the whole
// dump decoded into terms (ReadETSFile): the reference for the streaming
// one.
func readMsgStoreIndexTerms(b []byte) ([]MsgLocation, error) {
	f, err := etsReadTable(b, MsgStoreIndexTable)
	if err != nil {
		return nil, err
	}
	out := make([]MsgLocation, 0, len(f.Objects))
	for i, o := range f.Objects {
		l, ok := msgLocation(o)
		if !ok {
			return nil, format.Corrupt(f.ObjOffs[i], "msg_location", format.ErrInvalid)
		}
		out = append(out, l)
	}
	return out, nil
}

// TestReadMsgStoreIndexStreams: ReadMsgStoreIndex, which decodes one
// object at a time, and ReadETSInfo, which keeps no object, give what the
// whole-dump decode gives (entries, header, error and its offset) on both
// fixture dumps and on copies with one byte changed at hundreds of
// places (framing, MD5, terms, the end of table).
func TestReadMsgStoreIndexStreams(t *testing.T) {
	cases := 0
	for _, fx := range etsFixtures {
		orig := etsRead(t, etsStoreDir(t, fx.fixture, fx.node), "msg_store_index.ets")
		step := max(1, len(orig)/300)
		for at := -1; at < len(orig); at += step {
			b := append([]byte(nil), orig...)
			if at >= 0 {
				b[at] ^= 0x5A
			}
			want, werr := readMsgStoreIndexTerms(b)
			got, gerr := ReadMsgStoreIndex(b)
			if fmt.Sprint(werr) != fmt.Sprint(gerr) || !reflect.DeepEqual(want, got) && len(want)+len(got) > 0 {
				t.Fatalf("%s byte %d: streaming %d entries, %v; whole %d entries, %v", fx.fixture, at, len(got), gerr, len(want), werr)
			}
			wf, werr := ReadETSFile(b)
			gf, gerr := ReadETSInfo(b)
			if fmt.Sprint(werr) != fmt.Sprint(gerr) || (werr == nil && (wf.Closed != gf.Closed || wf.Count != gf.Count ||
				!bytes.Equal(wf.InfoRaw, gf.InfoRaw) || !reflect.DeepEqual(wf.Info, gf.Info))) {
				t.Fatalf("%s byte %d: ReadETSInfo %v, ReadETSFile %v", fx.fixture, at, gerr, werr)
			}
			cases++
		}
	}
	t.Logf("%d dumps compared", cases)
}
