package rabbitmq_test

import (
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
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

// BenchmarkReadVHostQueuesRefs reads every queue index of the generated
// vhost the way scan and verify do (segment after segment into reused
// storage, each reference handed to a callback).
func BenchmarkReadVHostQueuesRefs(b *testing.B) {
	dir := benchVHost(b)
	paths, err := filepath.Glob(filepath.Join(dir, "queues", "*", "*.qi"))
	if err != nil || len(paths) == 0 {
		b.Fatalf("no .qi segments: %v", err)
	}
	var n int64
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil {
			b.Fatal(err)
		}
		n += st.Size()
	}
	b.SetBytes(n)
	b.ReportAllocs()
	for b.Loop() {
		refs := 0
		if _, err := rfmt.ReadVHostQueuesRefsFunc(dir, func(_ *rfmt.QueueDir, r []rfmt.QueueRef) { refs += len(r) }); err != nil || refs == 0 {
			b.Fatalf("%d references, %v", refs, err)
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

// TestRefsFuncAllocations: reading a queue's references again allocates
// a small part of what its segment files hold: the files are read into
// recycled buffers and decoded into recycled scratch. Before that, each
// segment read allocated the file's size (128 KiB for 4096 entries) and
// each queue dir 1.5 MB of decode scratch plus its references' growth.
func TestRefsFuncAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector's sync.Pool drops buffers at random")
	}
	sum, err := gen.Generate(t.TempDir(), gen.Config{Seed: 5, Kind: gen.MC, TotalBytes: 64 << 20, Queues: 1})
	if err != nil {
		t.Fatal(err)
	}
	segs, _ := filepath.Glob(filepath.Join(sum.VHostDir, "queues", "*", "*.qi"))
	var files int64
	for _, p := range segs {
		if st, err := os.Stat(p); err == nil {
			files += st.Size()
		}
	}
	if len(segs) < 2 {
		t.Fatalf("%d .qi segments: the test needs several", len(segs))
	}
	refs := 0
	read := func() {
		if _, err := rfmt.ReadVHostQueuesRefsFunc(sum.VHostDir, func(_ *rfmt.QueueDir, r []rfmt.QueueRef) { refs += len(r) }); err != nil {
			t.Fatal(err)
		}
	}
	// What the pools save is measured on one P, between collections:
	// a sync.Pool's last Put on a P is private to it (a dir read on
	// another P does not see it), and collections empty the pools. Either
	// made a second read allocate 2 MB about one run in ten.
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	read() // fills the pools
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	read()
	runtime.ReadMemStats(&after)
	alloc := int64(after.TotalAlloc - before.TotalAlloc)
	t.Logf("%d segments, %d bytes, %d references: a second read allocated %d bytes", len(segs), files, refs/2, alloc)
	if alloc > files/4 {
		t.Errorf("a second read allocated %d bytes for %d bytes of segments", alloc, files)
	}
}
