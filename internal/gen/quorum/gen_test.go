package quorum_test

import (
	"context"
	"testing"

	genq "github.com/storectl/storectl/internal/gen/quorum"
	"github.com/storectl/storectl/pkg/scan"
	"github.com/storectl/storectl/pkg/scan/quorum"
)

// TestGenerate: a generated node dir scans without a finding above info,
// every record and entry checked, and verify predicts every message
// written (nothing settled) in each queue.
func TestGenerate(t *testing.T) {
	t.Parallel()
	sum, err := genq.Generate(t.TempDir(), genq.Config{Seed: 3, TotalBytes: 6 << 20, SegmentEntries: 512})
	if err != nil {
		t.Fatal(err)
	}
	if sum.Segments < 4 || sum.WALRecords == 0 || sum.Messages == 0 {
		t.Fatalf("%+v", sum)
	}
	res, err := quorum.Scan(context.Background(), quorum.Config{Root: sum.Node, Replay: true}, scan.Options{})
	if err != nil || res.Incomplete {
		t.Fatalf("%v %v", err, res.Errors)
	}
	for _, f := range res.Findings {
		if f.Severity != scan.Info {
			t.Errorf("%s %s@%d: %s", f.Code, f.Path, f.Offset, f.Message)
		}
	}
	keep := 0
	for _, q := range res.Queues {
		if q.NextStart.State != quorum.StartOK || !q.NextStart.Exact {
			t.Errorf("%s: %+v", q.Queue, q.NextStart)
		}
		keep += q.Keep
	}
	if len(res.Queues) != 4 || keep != sum.Messages {
		t.Fatalf("%d queues keep %d, %d written", len(res.Queues), keep, sum.Messages)
	}
	t.Logf("%+v", sum)
}
