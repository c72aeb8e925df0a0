package rabbitmq

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/storectl/storectl/internal/testutil"
	"github.com/storectl/storectl/pkg/format"
)

type rdqSummary struct {
	File          string `json:"file"`
	FileSize      int64  `json:"file_size"`
	Messages      int    `json:"messages"`
	ScanEndOffset int64  `json:"scan_end_offset"`
	Error         string `json:"error"`
}

// TestScanGen1Datasets runs the generation-1 model over every .rdq of the
// 3.10.8 datasets and compares with the real rabbit_msg_file:scan/4 output.
func TestScanGen1Datasets(t *testing.T) {
	total, files := 0, 0
	for _, name := range []string{"clean-shutdown", "crash", "crash-cqv2", "crash-mid-write-confirmed"} {
		root := rdqDataset(t, "rabbitmq", "datasets", name+".tar.gz")
		res := testutil.Testdata("rabbitmq", "results", name, "scan")
		sums := testutil.ReadJSONL[rdqSummary](t, filepath.Join(res, "summary.jsonl"))
		for _, s := range sums {
			b, err := os.ReadFile(filepath.Join(root, "rmqfix@localhost", s.File))
			if err != nil {
				t.Fatal(err)
			}
			got, err := ScanGen1(b)
			if err != nil {
				t.Fatalf("%s/%s: %v", name, s.File, err)
			}
			store := filepath.Base(filepath.Dir(s.File))
			want := testutil.ReadJSONL[rdqOracleRecord](t, filepath.Join(res, store+"-"+filepath.Base(s.File)+".jsonl"))
			total += rdqCompare(t, name+"/"+s.File, rdqFromScan(got.Records), want)
			if got.End != s.ScanEndOffset || len(got.Records) != s.Messages {
				t.Errorf("%s/%s: end %d, %d records; oracle %d, %d", name, s.File, got.End, len(got.Records), s.ScanEndOffset, s.Messages)
			}
			files++
		}
	}
	t.Logf("gen1: %d files, %d records compared", files, total)
	if files != 639 || total != 2777 { // 29+28+29+549+transient files; fails if a dataset silently drops out
		t.Fatalf("too few compared: %d files, %d records", files, total)
	}
}

// TestScanGen1EdgeCases covers the 18 synthetic edge cases, including the
// scanner crash of case 13.
func TestScanGen1EdgeCases(t *testing.T) {
	root := rdqDataset(t, "rabbitmq", "datasets", "edge-cases.tar.gz")
	res := testutil.Testdata("rabbitmq", "results", "edge-cases")
	sums := testutil.ReadJSONL[rdqSummary](t, filepath.Join(res, "summary.jsonl"))
	for _, s := range sums {
		b, err := os.ReadFile(filepath.Join(root, s.File))
		if err != nil {
			t.Fatal(err)
		}
		got, err := ScanGen1(b)
		if s.Error != "" {
			var ce *format.CorruptError
			if !errors.As(err, &ce) || !errors.Is(err, format.ErrInvalid) || ce.Offset != 10503 {
				t.Errorf("%s: oracle crashed (%s), model err = %v", s.File, s.Error, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", s.File, err)
		}
		want := testutil.ReadJSONL[rdqOracleRecord](t, filepath.Join(res, "edge-"+s.File+".jsonl"))
		rdqCompare(t, s.File, rdqFromScan(got.Records), want)
		if got.End != s.ScanEndOffset {
			t.Errorf("%s: end %d, oracle %d", s.File, got.End, s.ScanEndOffset)
		}
	}
	if len(sums) != 18 {
		t.Fatalf("%d edge cases, want 18", len(sums))
	}
}

// rdqQIRefs reads qi-refs.tsv: the msg ids the .qi files reference.
func rdqQIRefs(t *testing.T, path string) map[[16]byte]bool {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	refs := map[[16]byte]bool{}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		f := strings.Split(line, "\t")
		id, err := hex.DecodeString(f[len(f)-1])
		if err != nil || len(id) != 16 {
			t.Fatalf("bad qi-refs line %q", line)
		}
		refs[[16]byte(id)] = true
	}
	return refs
}

// TestScanDataRabbitMQ40 compares the generation-2/3 model with the real
// 4.0.5 scanner: scan/ (accept-all Fun, /1) and scan-refs/ (a Fun that
// accepts ids referenced by a .qi and not yet located, like dirty recovery).
func TestScanDataRabbitMQ40(t *testing.T) {
	gen, opts := ScanOptionsFor(4, 0, 5)
	if gen != 3 || opts.LargeMessageShortcut || opts.OffByNineFix {
		t.Fatalf("ScanOptionsFor(4.0.5) = %d %+v", gen, opts)
	}
	total := 0
	for _, name := range []string{"clean-shutdown", "crash"} {
		root := rdqDataset(t, "rabbitmq-4.0", "datasets", name+".tar.gz")
		res := testutil.Testdata("rabbitmq-4.0", "results", name)
		refs := rdqQIRefs(t, filepath.Join(res, "qi-refs.tsv"))
		located := map[[16]byte]bool{}
		refsOpts := opts
		refsOpts.Valid = func(r ScanRecord) Validity {
			if refs[r.MsgID] && !located[r.MsgID] {
				located[r.MsgID] = true
				return Valid
			}
			return Invalid
		}
		for _, p := range rdqStoreFiles(t, filepath.Join(rdqVhostDir(root, "rmq40@localhost"), "msg_store_persistent")) {
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			base := "msg_store_persistent-" + filepath.Base(p) + ".jsonl"
			want := testutil.ReadJSONL[rdqOracleRecord](t, filepath.Join(res, "scan", base))
			total += rdqCompare(t, name+"/scan/"+base, rdqFromScan(ScanData(b, opts)), want)
			wantRefs := testutil.ReadJSONL[rdqOracleRecord](t, filepath.Join(res, "scan-refs", base))
			total += rdqCompare(t, name+"/scan-refs/"+base, rdqFromScan(ScanData(b, refsOpts)), wantRefs)
		}
		if len(located) != 279 {
			t.Errorf("%s: located %d referenced ids, README says 279", name, len(located))
		}
	}
	t.Logf("gen3: %d records compared", total)
}

// TestScanDataMC checks the mc fixture files against their tags' scanners.
func TestScanDataMC(t *testing.T) {
	for _, v := range []string{"mc-3.13.7", "mc-4.1.8", "alt-otp25/mc-3.13.7", "alt-otp25/mc-4.1.8"} {
		b, err := os.ReadFile(testutil.Testdata("rabbitmq-mc", v+".rdq"))
		if err != nil {
			t.Fatal(err)
		}
		_, opts := ScanOptionsFor(4, 1, 8)
		if strings.Contains(v, "3.13.7") {
			_, opts = ScanOptionsFor(3, 13, 7)
		}
		want := testutil.ReadJSONL[rdqOracleRecord](t, testutil.Testdata("rabbitmq-mc", v+".scan.jsonl"))
		if rdqCompare(t, v, rdqFromScan(ScanData(b, opts)), want) != 17 {
			t.Errorf("%s: want 17 records", v)
		}
	}
}

// TestScanDataUpstreamCases reproduces the cases quoted in §3.3/§3.4 from
// upstream tests and the spec's verified runs.
func TestScanDataUpstreamCases(t *testing.T) {
	// backing_queue_SUITE msg_store_file_scan1 (PR #12392).
	f := append([]byte{0, 0, 0, 0, 0, 0, 0, 17, 17}, "idididididididid"...)
	f = append(f, 255)
	f = append(f, make([]byte, 4352)...)
	f = append(f, 255)
	id := [16]byte([]byte("idididididididid"))
	only := func(r ScanRecord) Validity {
		if r.MsgID == id && r.TotalSize == 4378 && r.Offset == 1 {
			return Valid
		}
		return Invalid
	}
	got := ScanData(f, ScanOptions{Valid: only})
	if len(got) != 1 || got[0] != (ScanRecord{MsgID: id, Offset: 1, TotalSize: 4378}) {
		t.Fatalf("msg_store_file_scan1: %+v", got)
	}
	// Off-by-nine (§3.3): 8-byte value FileSize-4, 8 zero bytes, a record.
	rec := rdqTestRecord([16]byte{1, 2, 3}, []byte{131, 106})
	g := make([]byte, 16, 16+len(rec))
	g = append(g, rec...)
	binary.BigEndian.PutUint64(g, uint64(len(g)-4))
	if got := ScanData(g, ScanOptions{}); len(got) != 0 {
		t.Fatalf("gen2 found %+v, want nothing (off-by-nine)", got)
	}
	_, fixed := ScanOptionsFor(4, 1, 8)
	if got := ScanData(g, fixed); len(got) != 1 || got[0].Offset != 16 {
		t.Fatalf("4.1.8 found %+v, want the record at 16", got)
	}
	// Large message alone in its file: the shortcut accepts it even when the
	// file does not fit one block.
	big := rdqTestRecord([16]byte{9}, append([]byte{131, 109, 0, 0x40, 0, 0}, make([]byte, 0x400000)...))
	if got := ScanData(big, fixed); len(got) != 1 || got[0].TotalSize != int64(len(big)) {
		t.Fatalf("large: %+v", got)
	}
}

// rdqTestRecord frames body like writer_append does.
func rdqTestRecord(id [16]byte, body []byte) []byte {
	b := binary.BigEndian.AppendUint64(nil, uint64(16+len(body)))
	b = append(b, id[:]...)
	b = append(b, body...)
	return append(b, 0xFF)
}

func TestScanOptionsFor(t *testing.T) {
	tests := []struct {
		v           [3]int
		gen         int
		large, nine bool
	}{
		{[3]int{3, 10, 8}, 1, false, false}, {[3]int{3, 13, 0}, 1, false, false},
		{[3]int{3, 13, 1}, 2, false, false}, {[3]int{3, 13, 7}, 2, false, false},
		{[3]int{4, 0, 2}, 2, false, false}, {[3]int{4, 0, 3}, 3, false, false},
		{[3]int{4, 0, 7}, 3, true, false}, {[3]int{4, 1, 0}, 3, true, false},
		{[3]int{4, 1, 4}, 3, true, false}, {[3]int{4, 1, 5}, 3, true, true}, {[3]int{4, 2, 0}, 3, true, true},
	}
	for _, tt := range tests {
		gen, o := ScanOptionsFor(tt.v[0], tt.v[1], tt.v[2])
		if gen != tt.gen || o.LargeMessageShortcut != tt.large || o.OffByNineFix != tt.nine {
			t.Errorf("%v: gen %d %+v", tt.v, gen, o)
		}
	}
}
