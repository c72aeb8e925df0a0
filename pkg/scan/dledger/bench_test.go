package dledger

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	gen5x "github.com/storectl/storectl/internal/gen/rocketmq5x"
	"github.com/storectl/storectl/pkg/scan"
)

// BenchmarkDLedgerScan: the DLedger scan of a generated store of
// STORECTL_BENCH_MB MiB (default 256): MB/s over its data files.
func BenchmarkDLedgerScan(b *testing.B) {
	mb := int64(256)
	if v, err := strconv.ParseInt(os.Getenv("STORECTL_BENCH_MB"), 10, 64); err == nil && v > 0 {
		mb = v
	}
	dir := filepath.Join(b.TempDir(), "dl")
	sum, err := gen5x.GenerateDLedger(dir, gen5x.Config{TotalBytes: mb << 20, Seed: 1})
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(sum.LogBytes)
	b.ResetTimer()
	for range b.N {
		res, err := Scan(context.Background(), Config{Root: dir}, scan.Options{})
		if err != nil || res.Incomplete {
			b.Fatal(err, res.Errors)
		}
	}
}
