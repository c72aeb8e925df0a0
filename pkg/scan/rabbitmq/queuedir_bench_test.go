package rabbitmq_test

import (
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"testing"

	gen "github.com/storectl/storectl/internal/gen/rabbitmq"
	rscan "github.com/storectl/storectl/pkg/scan/rabbitmq"
)

// benchVHost generates a 128 MiB vhost that stopped cleanly for the
// queue index reader's benchmark.
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
		if _, err := rscan.ReadVHostQueuesRefsFunc(dir, func(_ *rscan.QueueDir, r []rscan.QueueRef) { refs += len(r) }); err != nil || refs == 0 {
			b.Fatalf("%d references, %v", refs, err)
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
		if _, err := rscan.ReadVHostQueuesRefsFunc(sum.VHostDir, func(_ *rscan.QueueDir, r []rscan.QueueRef) { refs += len(r) }); err != nil {
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
