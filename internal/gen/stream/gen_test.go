package stream_test

import (
	"context"
	"path/filepath"
	"testing"

	genstream "github.com/storectl/storectl/internal/gen/stream"
	"github.com/storectl/storectl/pkg/scan"
	sscan "github.com/storectl/storectl/pkg/scan/stream"
)

// TestGenerate: a generated stream scans clean, holds what the generator
// says, and its indexes are the ones osiris would write.
func TestGenerate(t *testing.T) {
	out := t.TempDir()
	sum, err := genstream.Generate(out, genstream.Config{Seed: 1, TotalBytes: 3 << 20, MaxSegmentSize: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	res, err := sscan.ScanStreams(context.Background(), sscan.Config{Root: sum.Node, StreamRoots: []string{filepath.Join(sum.Node, "stream")}}, scan.Options{Jobs: 2})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range res.Findings {
		t.Errorf("%s %s@%d: %s", f.Code, f.Path, f.Offset, f.Message)
	}
	q := res.Streams[0].Queue
	if q.Entries != sum.Messages || q.Chunks != sum.Chunks || q.Segments != sum.Segments || q.TrackingChunks != sum.Segments-1 || sum.Segments < 3 {
		t.Fatalf("queue %+v, generated %+v", q, sum)
	}
	for _, p := range res.Streams[0].Pairs() {
		idx, _, err := sscan.BuildIndex(filepath.Join(sum.Node, filepath.FromSlash(p.Segment)))
		if err != nil || int64(len(idx)) != p.IndexSize || !p.IndexOK {
			t.Fatalf("%s: rebuilt index %d bytes (%v), generated %d, ok %v", p.Segment, len(idx), err, p.IndexSize, p.IndexOK)
		}
	}
}
