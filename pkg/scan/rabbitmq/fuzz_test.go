package rabbitmq

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/storectl/storectl/internal/testutil"
)

// FuzzWalk: any bytes as an .rdq file: no panic, records lie inside the
// file, in order, without overlap, and every hazard victim is a record.
func FuzzWalk(f *testing.F) {
	addRDQSeeds(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		fs := &FileScan{Number: -1}
		walk(b, fs, nil)
		prev := int64(0)
		at := map[int64]bool{}
		for i, r := range fs.Records {
			r.Status = []string{StatusReferenced, StatusUnreferenced, StatusDuplicate}[i%3]
			if r.Offset < prev || r.End() > int64(len(b)) {
				t.Fatalf("record %+v outside [%d, %d]", r, prev, len(b))
			}
			prev = r.End()
			at[r.Offset] = true
		}
		hazards(b, fs, nil)
		for _, h := range fs.Hazards {
			for _, v := range h.Victims {
				if !at[v.Offset] {
					t.Fatalf("victim %+v is no record", v)
				}
			}
		}
		_ = fileFindings(fs, brokerVersion{}, true)
	})
}

// addRDQSeeds seeds an .rdq fuzz target: the small real mc records (big
// inputs slow the fuzzer down to a few execs per second), also with a
// zero hole and a short frame.
func addRDQSeeds(f *testing.F) {
	paths, _ := filepath.Glob(testutil.Testdata("rabbitmq-mc", "*.rdq"))
	for _, p := range paths {
		if b, err := os.ReadFile(p); err == nil && len(b) > 0 {
			b = b[:min(len(b), 4096)] // the first records and a torn one
			f.Add(b)
			f.Add(append(append(append([]byte(nil), b[:len(b)/2]...), make([]byte, 5)...), b[len(b)/2:]...))
		}
	}
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 5, 'a', 'b', 'c', 'd', 'e', 0xFF})
}

// FuzzParseIndexETS: no panic on any dump.
func FuzzParseIndexETS(f *testing.F) {
	f.Add([]byte{1, 2, 3, 4, 0x63, 0x58, 0x4D, 0x0B, 0, 0, 0, 3, 0x62, 0x57, 0x4C, 0x41, 131, 106, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _ = ParseIndexETS(b)
		_, _ = ParseFileSummaryETS(b)
	})
}
