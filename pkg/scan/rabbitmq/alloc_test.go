package rabbitmq

import (
	"context"
	"testing"

	"github.com/storectl/storectl/internal/gen/rabbitmq"
	"github.com/storectl/storectl/pkg/scan"
)

// TestScanAllocationsNotPerRecord: issue 7 asks for no per-record
// allocation in the hot path. Scan and verify run over a generated vhost
// of 8 MiB and one of 32 MiB (#basic_message{} and #mc{} terms, four
// queue indexes, no findings); the allocations the larger one adds,
// divided by the records it adds, must stay well under 1: what grows
// with the store is allocated per file, per queue index segment and per
// finding, and one allocation per record would read 1 or more. Scan runs
// with and without a clean-shutdown index, which takes another path.
//
// Verify also predicts every queue index entry (one a record here). The
// queue index reader gave each shared-store entry its msg id as a 32-byte
// hex string, one allocation an entry (1.06-1.09 a record here); it now
// hands ids as bytes (ReadQueueDirSegmentsIDs) and only the entries
// that get a finding are given the string, so verify is held to the same
// bound as scan.
func TestScanAllocationsNotPerRecord(t *testing.T) {
	if testing.Short() {
		t.Skip("generates 40 MiB per case")
	}
	for _, c := range []struct {
		name  string
		cfg   rabbitmq.Config
		check func(ctx context.Context, cfg Config, opts scan.Options) (*scan.Result, error)
		max   float64 // allocations for each record added
	}{
		{"scan/basic_message", rabbitmq.Config{Kind: rabbitmq.BasicMessage}, Scan, 0.5},
		{"scan/mc", rabbitmq.Config{Kind: rabbitmq.MC}, Scan, 0.5},
		{"scan/clean-shutdown", rabbitmq.Config{Kind: rabbitmq.MC, CleanShutdown: true}, Scan, 0.5},
		{"verify/mc", rabbitmq.Config{Kind: rabbitmq.MC}, Verify, 0.5},
		{"verify/clean-shutdown", rabbitmq.Config{Kind: rabbitmq.MC, CleanShutdown: true}, Verify, 0.5},
	} {
		t.Run(c.name, func(t *testing.T) {
			var allocs [2]float64
			var records [2]int
			for i, mib := range []int64{8, 32} {
				cfg := c.cfg
				cfg.Seed, cfg.TotalBytes = 11, mib<<20
				sum, err := rabbitmq.Generate(t.TempDir(), cfg)
				if err != nil {
					t.Fatal(err)
				}
				var res *scan.Result
				allocs[i] = testing.AllocsPerRun(2, func() {
					res, err = c.check(context.Background(), Config{Root: sum.VHostDir, VHostDirs: []string{sum.VHostDir}}, scan.Options{Jobs: 2})
				})
				if err != nil {
					t.Fatal(err)
				}
				if len(res.Findings) != 0 {
					t.Fatalf("%d findings on a generated store without damage, first %+v", len(res.Findings), res.Findings[0])
				}
				records[i] = sum.Records
			}
			per := (allocs[1] - allocs[0]) / float64(records[1]-records[0])
			t.Logf("%.0f allocations for %d records, %.0f for %d: %.3f for each record added", allocs[0], records[0], allocs[1], records[1], per)
			if per >= c.max {
				t.Errorf("%.3f allocations for each record added, want under %.1f", per, c.max)
			}
		})
	}
}
