package rabbitmq

import (
	"context"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/storectl/storectl/internal/testutil"
	rfmt "github.com/storectl/storectl/pkg/format/rabbitmq"
	"github.com/storectl/storectl/pkg/scan"
)

// TestEdgeCases runs the 18 synthetic edge cases of testdata/rabbitmq
// (README "Edge cases") and compares with the real 3.10.8 scanner's
// results/edge-cases/. Every record the oracle reports is found at the
// same offset; every record storectl finds beyond it is explained (the
// asserted reason); the findings are the asserted codes.
func TestEdgeCases(t *testing.T) {
	root := testutil.Untar(t, testutil.Testdata("rabbitmq", "datasets", "edge-cases.tar.gz"))
	res := testutil.Testdata("rabbitmq", "results", "edge-cases")
	cases := []struct {
		file  string
		extra map[int64]string // offset -> why the 3.10 scanner misses it
		codes []string         // finding codes (sorted, with @offset)
		end   string
	}{
		{"01-two-valid", nil, nil, "eof"},
		// storectl finds B after the 8 zero bytes that stop the 3.10 scanner, and reports the gen-1 hazard.
		{"02-zero-size-word-between", map[int64]string{10511: "after a zero word at 10503"}, []string{"rabbitmq.rdq.gen1-stop@10503"}, "eof"},
		{"03-zero-gap-100-between", map[int64]string{10603: "after a zero word at 10503"}, []string{"rabbitmq.rdq.gen1-stop@10503"}, "eof"},
		{"04-torn-tail", nil, []string{"rabbitmq.rdq.torn-tail@10503"}, "torn"},
		{"05-size-only-tail", nil, []string{"rabbitmq.rdq.torn-tail@10503"}, "torn"},
		{"06-short-tail-5-bytes", nil, nil, "zero"}, // the 5 bytes are zeros: a zero tail, not a torn record
		{"07-bad-marker-middle", nil, []string{"rabbitmq.rdq.bad-marker@10503"}, "eof"},
		{"08-one-ff-byte-between", map[int64]string{10504: "after a oversize length at 10503"}, []string{"rabbitmq.rdq.gen1-stop@10503"}, "eof"},
		{"09-ff-gap-100-between", map[int64]string{10603: "after a oversize length at 10503"}, []string{"rabbitmq.rdq.gen1-stop@10503"}, "eof"},
		{"10-all-ff-64k", nil, []string{"rabbitmq.rdq.garbage-tail@0"}, "garbage"},
		{"11-all-zero-64k", nil, nil, "zero"},
		{"12-zero-tail-after-records", nil, nil, "zero"},
		// The 3.10 scanner crashes on the short frame; storectl reports the crash and finds A and B.
		// The generation-2 model also loses B: the window at 10504 (the short frame's size bytes and
		// 'a') claims a 1377-byte frame ending on a 0xFF; asserted against ScanData below.
		{"13-size-below-16-marker-ff", map[int64]string{0: "scanner crash at 10503", 10517: "scanner crash at 10503"},
			[]string{"rabbitmq.rdq.scanner-crash@10503", "rabbitmq.rdq.zero-hole-misread@10504"}, "eof"},
		{"14-huge-size-field", map[int64]string{8: "after a oversize length at 0"}, []string{"rabbitmq.rdq.gen1-stop@0"}, "eof"},
		{"15-duplicate-record", nil, []string{"rabbitmq.rdq.duplicate@10503"}, "eof"},
		{"16-empty-file", nil, nil, "eof"},
		// The 4 MiB record crossing the block boundary is found; its body (0x07 bytes) is no ETF term.
		{"17-record-crossing-4MiB-block", nil, []string{"rabbitmq.rdq.bad-body@0", "rabbitmq.rdq.large-message-inline@0"}, "eof"},
		{"18-ff-body-record-then-ff-fill", nil, []string{"rabbitmq.rdq.bad-body@0", "rabbitmq.rdq.garbage-tail@5025"}, "garbage"},
	}
	for _, c := range cases {
		p := filepath.Join(root, c.file+".rdq")
		s := newScanner(root, brokerVersion{}, scan.Options{})
		fs := s.scanFile(context.Background(), rdqFile{p, -1}, true, false)
		if fs.Err != nil {
			t.Fatal(fs.Err)
		}
		got := map[int64]*Record{}
		for _, r := range fs.Records {
			got[r.Offset] = r
		}
		for _, w := range testutil.ReadJSONLIfExists[oracleRec](t, filepath.Join(res, "edge-"+c.file+".rdq.jsonl")) {
			r := got[w.Offset]
			if r == nil || r.ID() != w.MsgID || r.TotalSize != w.TotalSize {
				t.Errorf("%s: oracle record %+v not found", c.file, w)
			}
			delete(got, w.Offset)
		}
		if c.file == "15-duplicate-record" {
			delete(got, 10503) // the oracle lists both copies; checked above
		}
		for off := range got {
			if why := explainExtra(fs, off); why != c.extra[off] {
				t.Errorf("%s: extra record at %d explained %q, want %q", c.file, off, why, c.extra[off])
			}
		}
		if len(got) != len(c.extra) {
			t.Errorf("%s: %d extra records, want %d", c.file, len(got), len(c.extra))
		}
		var fc []string
		for _, f := range fileFindings(fs, brokerVersion{}, false) {
			fc = append(fc, f.Code+"@"+itoa(f.Offset))
		}
		sort.Strings(fc)
		if strings.Join(fc, " ") != strings.Join(c.codes, " ") || fs.End != c.end {
			t.Errorf("%s: findings %v end %s, want %v end %s", c.file, fc, fs.End, c.codes, c.end)
		}
	}
	// Case 13 under the generation-2 model: a bogus frame at 10504, B (10517) lost.
	b := readFile(t, filepath.Join(root, "13-size-below-16-marker-ff.rdq"))
	var offs []int64
	for _, r := range rfmt.ScanData(b, rfmt.ScanOptions{}) {
		offs = append(offs, r.Offset)
	}
	if len(offs) != 2 || offs[0] != 0 || offs[1] != 10504 {
		t.Errorf("case 13 generation-2 model: %v, want [0 10504] (B at 10517 lost)", offs)
	}
}
