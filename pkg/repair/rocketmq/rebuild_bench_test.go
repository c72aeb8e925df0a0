package rocketmq

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"

	gen "github.com/storectl/storectl/internal/gen/rocketmq"
)

var rbBench struct {
	once  sync.Once
	root  string
	store string
	bytes int64
	err   error
}

// rbBenchStore generates a store of 256 MiB of records (64 MiB commitlog
// files, consume queues of the default size) once; the benchmark removes it.
func rbBenchStore(b *testing.B) (string, int64) {
	rbBench.once.Do(func() {
		rbBench.root, rbBench.err = os.MkdirTemp("", "storectl-rebuild-bench-")
		if rbBench.err != nil {
			return
		}
		rbBench.store = filepath.Join(rbBench.root, "store")
		var sum *gen.Summary
		sum, rbBench.err = gen.Generate(rbBench.store, gen.Config{MappedFileSize: 64 << 20, TotalBytes: 256 << 20, Seed: 1})
		if sum != nil {
			rbBench.bytes = int64(len(sum.Files)) * (64 << 20)
		}
	})
	if rbBench.err != nil {
		b.Fatal(rbBench.err)
	}
	return rbBench.store, rbBench.bytes
}

// BenchmarkRebuildConsumeQueue measures the dry-run plan of a consume
// queue rebuild over a generated store of 256 MiB: one commitlog scan,
// every CQ file built into the stage and compared with the store's. The
// generator's CQs match, so the plan is empty. (The broker's own rebuild of
// 256 MiB took 0.8-3.8 s, testdata/rocketmq/README.md.)
func BenchmarkRebuildConsumeQueue(b *testing.B) {
	if testing.Short() {
		b.Skip("generates 256 MiB")
	}
	store, n := rbBenchStore(b)
	defer func() { // b.Loop runs this function once; regenerate if ever run again
		os.RemoveAll(rbBench.root)
		rbBench.once = sync.Once{}
	}()
	b.SetBytes(n)
	for b.Loop() {
		p, rep, err := PlanRebuildIndex(context.Background(), RebuildConfig{DataDir: store, SkipIndex: true})
		if err != nil {
			b.Fatal(err)
		}
		if len(p.Actions) != 0 {
			b.Fatalf("%d actions on a generated store: %+v", len(p.Actions), rep.Queues)
		}
		b.ReportMetric(float64(rep.Records), "records")
	}
}

// BenchmarkRebuildIndex measures the full dry-run plan of rebuild-index
// over the generated 256 MiB store: one commitlog scan with the index
// files built during it, the consume queues built and compared, and the
// staged index file (420 MB at the broker's default layout, the store has
// none) hashed for its replace-file action.
func BenchmarkRebuildIndex(b *testing.B) {
	if testing.Short() {
		b.Skip("generates 256 MiB")
	}
	store, n := rbBenchStore(b)
	defer func() { // as in BenchmarkRebuildConsumeQueue
		os.RemoveAll(rbBench.root)
		rbBench.once = sync.Once{}
	}()
	b.SetBytes(n)
	for b.Loop() {
		p, rep, err := PlanRebuildIndex(context.Background(), RebuildConfig{DataDir: store})
		if err != nil {
			b.Fatal(err)
		}
		if len(p.Actions) != 1 || len(rep.IndexFiles) != 1 {
			b.Fatalf("%d actions, %d index files; want the one new index file", len(p.Actions), len(rep.IndexFiles))
		}
		b.ReportMetric(float64(rep.IndexKeys), "keys")
	}
}
