package rocketmq

import (
	"encoding/binary"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"testing"

	gen "github.com/storectl/storectl/internal/gen/rocketmq"
	"github.com/storectl/storectl/internal/testutil"
	rmq "github.com/storectl/storectl/pkg/format/rocketmq"
	"github.com/storectl/storectl/pkg/scan"
)

// TestIndexChainJoinMatchesMemory: judging the slot chains from the
// newest entry per slot, with every other pointer sorted through spilled
// runs (runs of 3) and looked up after the walk, gives exactly the findings
// of holding every entry's key hash and judging as the walk goes — on
// every RocketMQ fixture as it is, and on index files whose prevs and slot
// heads were rewritten at random (to entries of other slots, of the same
// slot, out of range, to more than the findings cap lists).
func TestIndexChainJoinMatchesMemory(t *testing.T) {
	roots := fixtureStoreRoots(t)
	for _, n := range []int{5, 40, 600} {
		root := filepath.Join(testutil.Untar(t, testutil.Testdata("rocketmq", "rmq533-a-clean.tar.gz")), "store")
		damageIndexChains(t, root, n, uint64(n))
		roots = append(roots, root)
	}
	g := t.TempDir()
	if _, err := gen.Generate(g, gen.Config{MappedFileSize: 1 << 20, TotalBytes: 2 << 20, Seed: 4, BodyMin: 20, BodyMax: 200, MaxBody: 200,
		Index: true, IndexSlots: 250, IndexEntries: 1000}); err != nil {
		t.Fatal(err)
	}
	damageIndexChains(t, g, 300, 77)
	roots = append(roots, g)
	defer func(old int) { chainRunLen = old }(chainRunLen)
	chainRunLen = 3
	judged := 0
	for _, root := range roots {
		indexInMemory = true
		mem := verifyRoot(t, root, VerifyConfig{Config: Config{Root: root}})
		indexInMemory = false
		join := verifyRoot(t, root, VerifyConfig{Config: Config{Root: root}})
		if !reflect.DeepEqual(mem.Findings, join.Findings) {
			t.Fatalf("%s: %d findings in memory, %d through the join; first difference: %s", root, len(mem.Findings), len(join.Findings), firstDiff(mem.Findings, join.Findings))
		}
		judged += len(findCode(mem, CodeIndexBadChain))
	}
	if judged < 100 {
		t.Fatalf("only %d chain findings over the damaged stores: the damage does not reach the join", judged)
	}
}

// damageIndexChains rewrites n prev pointers and n/5 slot heads of every
// index file under root to random entries.
func damageIndexChains(t *testing.T, root string, n int, seed uint64) {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(root, "index", "*"))
	if len(files) == 0 {
		t.Fatalf("%s: no index files", root)
	}
	rng := rand.New(rand.NewPCG(seed, 1))
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
			e := 2 + rng.Int64N(used-2)
			binary.BigEndian.PutUint32(b[lay.EntryOffset(e)+16:], uint32(rng.Int64N(e+2)))
		}
		for range n / 5 {
			s := rng.Int64N(lay.Slots)
			binary.BigEndian.PutUint32(b[lay.SlotOffset(s):], uint32(rng.Int64N(used+1)))
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func firstDiff(a, b []scan.Finding) string {
	sort.SliceStable(a, func(i, j int) bool { return a[i].Offset < a[j].Offset })
	sort.SliceStable(b, func(i, j int) bool { return b[i].Offset < b[j].Offset })
	for i := range min(len(a), len(b)) {
		if !reflect.DeepEqual(a[i], b[i]) {
			return fmtFinding(a[i]) + " vs " + fmtFinding(b[i])
		}
	}
	return "one is a prefix of the other"
}
