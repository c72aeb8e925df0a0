package rabbitmq_test

import (
	"os"
	"path/filepath"
	"testing"

	gen "github.com/storectl/storectl/internal/gen/rabbitmq"
	rfmt "github.com/storectl/storectl/pkg/format/rabbitmq"
)

// benchVHost generates a 128 MiB vhost that stopped cleanly (queue index
// segments, msg_store_index.ets, file_summary.ets) for the index decoders'
// benchmarks.
func benchVHost(b *testing.B) string {
	b.Helper()
	if testing.Short() {
		b.Skip("generates 128 MiB")
	}
	sum, err := gen.Generate(b.TempDir(), gen.Config{Seed: 3, Kind: gen.MC, TotalBytes: 128 << 20, CleanShutdown: true})
	if err != nil {
		b.Fatal(err)
	}
	return sum.VHostDir
}

// BenchmarkReadQI decodes every v2 queue index segment (.qi) of the
// generated vhost.
func BenchmarkReadQI(b *testing.B) {
	paths, err := filepath.Glob(filepath.Join(benchVHost(b), "queues", "*", "*.qi"))
	if err != nil || len(paths) == 0 {
		b.Fatalf("no .qi segments: %v", err)
	}
	var files [][]byte
	var n int64
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			b.Fatal(err)
		}
		files, n = append(files, data), n+int64(len(data))
	}
	b.SetBytes(n)
	b.ReportAllocs()
	for b.Loop() {
		for _, data := range files {
			if _, err := rfmt.ReadQI(data); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// BenchmarkCheckMsgStoreIndex checks the generated clean-shutdown
// msg_store_index.ets as verify does (every object decoded, none kept).
func BenchmarkCheckMsgStoreIndex(b *testing.B) {
	data, err := os.ReadFile(filepath.Join(benchVHost(b), "msg_store_persistent", "msg_store_index.ets"))
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		closed, objects, err := rfmt.CheckMsgStoreIndex(data, nil)
		if err != nil || !closed || objects == 0 {
			b.Fatalf("closed %v, %d objects, %v", closed, objects, err)
		}
	}
}

// BenchmarkQuickMsgLocation decodes every object of the dump through the
// no-allocation decoder lean scan uses.
func BenchmarkQuickMsgLocation(b *testing.B) {
	data, err := os.ReadFile(filepath.Join(benchVHost(b), "msg_store_persistent", "msg_store_index.ets"))
	if err != nil {
		b.Fatal(err)
	}
	items, _, err := rfmt.ReadETSItems(data)
	if err != nil || len(items) == 0 {
		b.Fatalf("%d items, %v", len(items), err)
	}
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		quick := 0
		for _, it := range items {
			if _, ok := rfmt.QuickMsgLocation(it); ok {
				quick++
			}
		}
		if quick != len(items)-2 { // all but the table header and the end-of-table footer
			b.Fatalf("%d of %d objects of the generated dump take the quick decoder", quick, len(items))
		}
	}
}
