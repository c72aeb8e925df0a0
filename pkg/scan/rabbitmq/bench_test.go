package rabbitmq

import (
	"context"
	"os"
	"sync"
	"testing"

	"github.com/storectl/storectl/internal/gen/rabbitmq"
	"github.com/storectl/storectl/pkg/scan"
)

var (
	benchOnce sync.Once
	benchDir  string
	benchSum  *rabbitmq.Summary
	benchErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if benchDir != "" {
		os.RemoveAll(benchDir)
	}
	os.Exit(code)
}

// BenchmarkScanRDQ scans 288 MiB of generated .rdq data (18 files of
// 16 MiB, #mc{} records of 4–20 KB payload with zero holes and some
// unreferenced records), generated once per process.
func BenchmarkScanRDQ(b *testing.B) {
	if testing.Short() {
		b.Skip("generates 288 MiB")
	}
	benchOnce.Do(func() {
		if benchDir, benchErr = os.MkdirTemp("", "storectl-bench-rdq-"); benchErr != nil {
			return
		}
		benchSum, benchErr = rabbitmq.Generate(benchDir, rabbitmq.Config{Seed: 1, Kind: rabbitmq.MC,
			TotalBytes: 288 << 20, HoleEvery: 50, UnrefEvery: 20})
	})
	if benchErr != nil {
		b.Fatal(benchErr)
	}
	b.SetBytes(benchSum.Bytes)
	b.ResetTimer()
	for range b.N {
		res, err := Scan(context.Background(), Config{Root: benchDir, VHostDirs: []string{benchSum.VHostDir}}, scan.Options{})
		if err != nil {
			b.Fatal(err)
		}
		n := 0
		for _, f := range res.Files {
			n += f.Records
		}
		if n != benchSum.Records {
			b.Fatalf("%d records, generated %d", n, benchSum.Records)
		}
	}
}
