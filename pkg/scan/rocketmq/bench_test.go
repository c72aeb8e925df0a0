package rocketmq

import (
	"context"
	"os"
	"sync"
	"testing"

	gen "github.com/storectl/storectl/internal/gen/rocketmq"
	"github.com/storectl/storectl/pkg/scan"
)

var bench struct {
	once  sync.Once
	dir   string
	bytes int64
	err   error
}

// benchStore generates a store of 256 MiB of records (64 MiB commitlog
// files) once per test binary run.
func benchStore(b *testing.B) (string, int64) {
	bench.once.Do(func() {
		bench.dir, bench.err = os.MkdirTemp("", "storectl-rmq-bench-")
		if bench.err != nil {
			return
		}
		var sum *gen.Summary
		sum, bench.err = gen.Generate(bench.dir, gen.Config{MappedFileSize: 64 << 20, TotalBytes: 256 << 20, Seed: 1})
		if sum != nil {
			bench.bytes = int64(len(sum.Files)) * (64 << 20)
		}
	})
	if bench.err != nil {
		b.Fatal(bench.err)
	}
	return bench.dir, bench.bytes
}

func TestMain(m *testing.M) {
	code := m.Run()
	if bench.dir != "" {
		os.RemoveAll(bench.dir)
	}
	os.Exit(code)
}

func BenchmarkScanCommitLog(b *testing.B) {
	benchJobs(b, func(root string, jobs int) (*scan.Result, error) {
		return ScanCommitLog(context.Background(), Config{Root: root}, scan.Options{Jobs: jobs})
	})
}

// BenchmarkVerify is the full RocketMQ verify (commitlog scan plus every
// consume queue unit linked to its record) over the generated 256 MiB
// store, at 1 and 2 jobs.
func BenchmarkVerify(b *testing.B) {
	benchJobs(b, func(root string, jobs int) (*scan.Result, error) {
		return Verify(context.Background(), VerifyConfig{Config: Config{Root: root}}, scan.Options{Jobs: jobs})
	})
}

// benchJobs runs run over the generated 256 MiB store at 1 and 2 jobs;
// every run must succeed without warnings.
func benchJobs(b *testing.B, run func(root string, jobs int) (*scan.Result, error)) {
	if testing.Short() {
		b.Skip("generates 256 MiB")
	}
	root, n := benchStore(b)
	for _, jobs := range []int{1, 2} {
		b.Run("jobs="+string(rune('0'+jobs)), func(b *testing.B) {
			b.SetBytes(n)
			for b.Loop() {
				res, err := run(root, jobs)
				if err != nil || len(warnings(res)) > 0 {
					b.Fatalf("%v %+v", err, res.Findings)
				}
			}
		})
	}
}
