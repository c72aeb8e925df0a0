package stream_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	genstream "github.com/storectl/storectl/internal/gen/stream"
	"github.com/storectl/storectl/pkg/scan"
	"github.com/storectl/storectl/pkg/scan/stream"
)

// BenchmarkScan scans a generated 64 MiB stream (b.SetBytes: MB/s).
func BenchmarkScan(b *testing.B) {
	node := os.Getenv("STREAM_BENCH_NODE")
	size := int64(64 << 20)
	if node == "" {
		sum, err := genstream.Generate(b.TempDir(), genstream.Config{Seed: 1, TotalBytes: size, MaxSegmentSize: 32 << 20})
		if err != nil {
			b.Fatal(err)
		}
		node = sum.Node
	}
	cfg := stream.Config{Root: node, StreamRoots: []string{filepath.Join(node, "stream")}}
	b.ResetTimer()
	for range b.N {
		res, err := stream.ScanStreams(context.Background(), cfg, scan.Options{Jobs: 2})
		if err != nil || len(res.Findings) != 0 {
			b.Fatal(err, res.Findings)
		}
		b.SetBytes(res.BytesScanned)
	}
}
