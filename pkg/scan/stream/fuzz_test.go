package stream_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/storectl/storectl/internal/streamtest"
	"github.com/storectl/storectl/pkg/scan"
	"github.com/storectl/storectl/pkg/scan/stream"
)

// FuzzScanPair scans any segment and index bytes as one stream's only
// pair (and, with records, every message): no panic, no error but a
// finding, every finding inside its file.
func FuzzScanPair(f *testing.F) {
	for _, d := range streamtest.StreamDirs(f, streamtest.Datasets40[0]) {
		if !strings.Contains(d, "__s1c_") {
			continue
		}
		for _, n := range []string{"00000000000000000000", "00000000000000000059"} {
			s, _ := os.ReadFile(filepath.Join(d, n+".segment"))
			x, _ := os.ReadFile(filepath.Join(d, n+".index"))
			f.Add(s, x)
			f.Add(s[:len(s)/2], x)
			f.Add(s, x[:len(x)/2])
		}
	}
	f.Fuzz(func(t *testing.T, seg, idx []byte) {
		node := t.TempDir()
		dir := filepath.Join(node, "stream", "__f_1796159969530842441")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		sp, ip := filepath.Join(dir, "00000000000000000000.segment"), filepath.Join(dir, "00000000000000000000.index")
		os.WriteFile(sp, seg, 0o644)
		os.WriteFile(ip, idx, 0o644)
		size := map[string]int64{scan.Rel(node, sp): int64(len(seg)), scan.Rel(node, ip): int64(len(idx)), scan.Rel(node, dir): 0}
		for _, records := range []bool{false, true} {
			opts := scan.Options{}
			if records {
				opts.Records = func(any) error { return nil }
			}
			res, err := stream.ScanStreams(context.Background(), stream.Config{Root: node, StreamRoots: []string{filepath.Join(node, "stream")}}, opts)
			if err != nil || res.Incomplete {
				t.Fatalf("%v %v", err, res.Errors)
			}
			for _, fd := range res.Findings {
				n, ok := size[fd.Path]
				if !ok || fd.Offset < 0 || fd.Offset > n && n > 0 {
					t.Fatalf("finding %s at %s@%d outside the files", fd.Code, fd.Path, fd.Offset)
				}
			}
			if len(res.Streams) != 1 {
				t.Fatalf("%d streams", len(res.Streams))
			}
		}
	})
}
