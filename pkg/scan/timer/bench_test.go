package timer

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	gen5x "github.com/storectl/storectl/internal/gen/rocketmq5x"
	"github.com/storectl/storectl/pkg/scan"
)

// benchStore generates a timer store of STORECTL_BENCH_MB MiB (default
// 256) once per run.
func benchStore(b *testing.B) (string, int64) {
	mb := int64(256)
	if v, err := strconv.ParseInt(os.Getenv("STORECTL_BENCH_MB"), 10, 64); err == nil && v > 0 {
		mb = v
	}
	dir := filepath.Join(b.TempDir(), "timer")
	sum, err := gen5x.GenerateTimer(dir, gen5x.Config{TotalBytes: mb << 20, Seed: 1})
	if err != nil {
		b.Fatal(err)
	}
	return dir, sum.LogBytes + int64(sum.Units)*52
}

// BenchmarkTimerScan: the timer store scan of a generated store (the
// commitlog's recovery end given, as verify passes it): MB/s over the
// commitlog and timerlog bytes it reads.
func BenchmarkTimerScan(b *testing.B) {
	dir, n := benchStore(b)
	now := time.Now()
	b.SetBytes(n)
	b.ResetTimer()
	for range b.N {
		res, err := Scan(context.Background(), Config{Root: dir, RecoveryEnd: 1 << 62, Now: now}, scan.Options{})
		if err != nil || res.Incomplete {
			b.Fatal(err, res.Errors)
		}
	}
}
