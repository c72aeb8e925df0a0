package rocketmq

import (
	"context"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	gen "github.com/storectl/storectl/internal/gen/rocketmq"
	"github.com/storectl/storectl/internal/testutil"
	rmq "github.com/storectl/storectl/pkg/format/rocketmq"
	"github.com/storectl/storectl/pkg/scan"
)

// TestIndexBesideWalk: the index files' structure checks run beside the
// commitlog walk and their record checks after it; the findings, errors
// and layout are those of running the structure checks after the walk
// (indexSequential), whichever of the two ends first (a hook holds the
// structure checks back until the walk is well under way) — on every
// RocketMQ fixture and on index files whose chains, slot heads, key
// hashes, offsets and time diffs were rewritten at random, some to more
// findings than a file's cap lists, and with the commitlog cut short so
// that entries point past the recovery end. The record checks run as two
// halves at once (indexRecordsSplit) give the same result too.
func TestIndexBesideWalk(t *testing.T) {
	roots := fixtureStoreRoots(t)
	for i, n := range []int{5, 40, 600} {
		root := filepath.Join(testutil.Untar(t, testutil.Testdata("rocketmq", "rmq533-a-clean.tar.gz")), "store")
		damageIndexChains(t, root, n, uint64(n))
		damageIndexEntries(t, root, n, uint64(n+i))
		roots = append(roots, root)
	}
	g := t.TempDir()
	if _, err := gen.Generate(g, gen.Config{MappedFileSize: 1 << 20, TotalBytes: 3 << 20, Seed: 5, BodyMin: 20, BodyMax: 200, MaxBody: 200,
		Index: true, IndexSlots: 250, IndexEntries: 1000}); err != nil {
		t.Fatal(err)
	}
	damageIndexChains(t, g, 100, 7)
	damageIndexEntries(t, g, 300, 8)
	cut := filepath.Join(g, "commitlog", rmq.FormatFileName(2<<20))
	if err := os.Truncate(cut, 1<<19); err != nil { // the last file's second half: entries past the end
		t.Fatal(err)
	}
	roots = append(roots, g)
	defer func() { indexSequential, indexStructuresHook, indexRecordsSplit = false, nil, 1<<18 }()
	entryFindings := 0
	for _, root := range roots {
		indexSequential, indexStructuresHook = true, nil
		seq := verifyRoot(t, root, VerifyConfig{Config: Config{Root: root}})
		indexSequential = false
		beside := verifyRoot(t, root, VerifyConfig{Config: Config{Root: root}})
		indexStructuresHook = func(ctx context.Context) {
			select { // long enough for a fixture's walk to end first
			case <-time.After(50 * time.Millisecond):
			case <-ctx.Done():
			}
		}
		late := verifyRoot(t, root, VerifyConfig{Config: Config{Root: root}})
		indexStructuresHook, indexRecordsSplit = nil, 2
		halves := verifyRoot(t, root, VerifyConfig{Config: Config{Root: root}})
		indexRecordsSplit = 1 << 18
		for name, r := range map[string]*scan.Result{"beside the walk": beside, "after the walk's end": late,
			"records checked in two halves": halves} {
			if !reflect.DeepEqual(seq.Findings, r.Findings) {
				t.Fatalf("%s: %d findings sequential, %d %s; first difference: %s", root, len(seq.Findings), len(r.Findings), name,
					firstDiff(seq.Findings, r.Findings))
			}
			if !reflect.DeepEqual(seq.Errors, r.Errors) || !reflect.DeepEqual(seq.Layout, r.Layout) {
				t.Fatalf("%s: errors or layout differ %s: %v %v vs %v %v", root, name, seq.Errors, seq.Layout, r.Errors, r.Layout)
			}
		}
		for _, f := range seq.Findings {
			if f.Code == CodeIndexBadEntry || f.Code == CodeIndexBeyondEnd {
				entryFindings++
			}
		}
	}
	if entryFindings < 100 {
		t.Fatalf("only %d entry findings over the damaged stores: the damage does not reach the record checks", entryFindings)
	}
}

// damageIndexEntries rewrites the key hash, the commitlog offset or the
// time diff of n random used entries of every index file under root.
func damageIndexEntries(t *testing.T, root string, n int, seed uint64) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 2))
	files, _ := filepath.Glob(filepath.Join(root, "index", "*"))
	for _, p := range files {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		lay, err := rmq.IndexLayoutFromSize(int64(len(b)), 0)
		if err != nil {
			t.Fatal(err)
		}
		h, _ := rmq.DecodeIndexHeader(b, 0)
		used := int64(h.IndexCount)
		if used < 3 {
			continue
		}
		for range n {
			e := lay.EntryOffset(1 + rng.Int64N(used-1))
			switch rng.IntN(3) {
			case 0:
				binary.BigEndian.PutUint32(b[e:], uint32(rng.Int32()))
			case 1:
				phy := int64(binary.BigEndian.Uint64(b[e+4:]))
				binary.BigEndian.PutUint64(b[e+4:], uint64(max(phy+rng.Int64N(400)-200, 0)))
			default:
				binary.BigEndian.PutUint32(b[e+12:], uint32(rng.Int32N(1000)))
			}
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestIndexBesideWalkStops: when Verify returns early (cancelled during
// the walk, or no commitlog to walk) it stops the structure checks
// running beside the walk and waits for them: it neither hangs nor leaves
// them running.
func TestIndexBesideWalkStops(t *testing.T) {
	root := filepath.Join(testutil.Untar(t, testutil.Testdata("rocketmq", "rmq533-a-clean.tar.gz")), "store")
	defer func() { indexStructuresHook = nil }()
	var stopped chan struct{}
	indexStructuresHook = func(ctx context.Context) {
		<-ctx.Done() // until Verify cancels it: a Verify that did not would hang here
		close(stopped)
	}
	run := func(name string, cfg VerifyConfig, cancelAfter int) {
		t.Helper()
		stopped = make(chan struct{})
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		if cancelAfter > 0 {
			n := 0
			cfg.OnMessage = func(*rmq.Message, int64) error {
				if n++; n == cancelAfter {
					cancel()
				}
				return nil
			}
		}
		done := make(chan error, 1)
		go func() {
			_, err := Verify(ctx, cfg, scan.Options{})
			done <- err
		}()
		select {
		case err := <-done:
			if err == nil {
				t.Fatalf("%s: Verify returned no error", name)
			}
			if cancelAfter > 0 && !errors.Is(err, context.Canceled) {
				t.Fatalf("%s: %v, want context.Canceled", name, err)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("%s: Verify did not return", name)
		}
		select {
		case <-stopped:
		default:
			t.Fatalf("%s: Verify returned before the structure checks stopped", name)
		}
	}
	run("cancelled during the walk", VerifyConfig{Config: Config{Root: root}}, 3)
	noLog := t.TempDir()
	if err := os.Mkdir(filepath.Join(noLog, "index"), 0o755); err != nil {
		t.Fatal(err)
	}
	run("no commitlog", VerifyConfig{Config: Config{Root: noLog}}, 0)
}
