package rocketmq

import (
	"encoding/binary"
	"math/bits"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	gen "github.com/storectl/storectl/internal/gen/rocketmq"
	"github.com/storectl/storectl/internal/testutil"
	rmq "github.com/storectl/storectl/pkg/format/rocketmq"
	"github.com/storectl/storectl/pkg/scan"
)

// TestCQClaimsSameAsLookups: the consume queue check with the units the
// walk claimed gives the findings, errors and layout of the check that
// looks every unit up (cqClaimsOff) — on every RocketMQ fixture, and on
// stores whose consume queues were damaged at random (units pointing
// elsewhere, wrong sizes and tags, a zero unit that ends a queue before
// claimed units, a file cut short, a file removed, units pointing past a
// commitlog cut short), where claims must be given back. It also checks
// that the claims were used: on a healthy generated store every unit is
// claimed, and on the damaged ones some queue's walk gave claims back.
func TestCQClaimsSameAsLookups(t *testing.T) {
	roots := fixtureStoreRoots(t)
	healthy := t.TempDir()
	if _, err := gen.Generate(healthy, gen.Config{MappedFileSize: 1 << 20, TotalBytes: 3 << 20, Seed: 3, BodyMin: 20, BodyMax: 200,
		MaxBody: 200, CQFileSize: 2000 * rmq.CQUnitSize, Index: true, IndexSlots: 250, IndexEntries: 1000}); err != nil {
		t.Fatal(err)
	}
	roots = append(roots, healthy)
	var damaged []string
	for i, n := range []int{3, 30, 300} {
		g := t.TempDir()
		if _, err := gen.Generate(g, gen.Config{MappedFileSize: 1 << 20, TotalBytes: 3 << 20, Seed: uint64(10 + i), BodyMin: 20, BodyMax: 200,
			MaxBody: 200, CQFileSize: 2000 * rmq.CQUnitSize}); err != nil {
			t.Fatal(err)
		}
		damageCQUnits(t, g, n, uint64(n))
		if i == 1 {
			cut := filepath.Join(g, "commitlog", rmq.FormatFileName(2<<20))
			if err := os.Truncate(cut, 1<<19); err != nil { // units past the recovery end
				t.Fatal(err)
			}
		}
		damaged = append(damaged, g)
	}
	for _, ds := range []string{"rmq533-a-clean"} {
		root := filepath.Join(testutil.Untar(t, testutil.Testdata("rocketmq", ds+".tar.gz")), "store")
		damageCQUnits(t, root, 5, 99)
		damaged = append(damaged, root)
	}
	roots = append(roots, damaged...)
	type stats struct {
		claimed int
		cut     bool
	}
	got := map[string]stats{}
	defer func() { cqClaimsOff, cqClaimsHook = false, nil }()
	var cur string
	cqClaimsHook = func(v *verifier) {
		n := 0
		for _, w := range v.claimedRecs {
			n += popcount(w)
		}
		got[cur] = stats{claimed: n, cut: v.claimsCut}
	}
	for _, root := range roots {
		cqClaimsOff = true
		lookups := verifyRootAnyway(t, root)
		cqClaimsOff, cur = false, root
		claims := verifyRootAnyway(t, root)
		if !reflect.DeepEqual(lookups.Findings, claims.Findings) {
			t.Fatalf("%s: %d findings by lookups, %d with claims; first difference: %s", root, len(lookups.Findings), len(claims.Findings),
				firstDiff(lookups.Findings, claims.Findings))
		}
		if !reflect.DeepEqual(lookups.Errors, claims.Errors) || !reflect.DeepEqual(lookups.Layout, claims.Layout) {
			t.Fatalf("%s: errors or layout differ: %v %v vs %v %v", root, lookups.Errors, lookups.Layout, claims.Errors, claims.Layout)
		}
	}
	if s := got[healthy]; s.claimed == 0 || s.cut {
		t.Fatalf("healthy store: %d records claimed, cut %v", s.claimed, s.cut)
	}
	cuts := 0
	for _, g := range damaged {
		if got[g].cut {
			cuts++
		}
	}
	if cuts == 0 {
		t.Fatal("no damaged store gave claims back past a queue's end")
	}
}

// verifyRootAnyway is verifyRoot for stores whose reads may fail.
func verifyRootAnyway(t *testing.T, root string) *scan.Result {
	t.Helper()
	res, err := Verify(t.Context(), VerifyConfig{Config: Config{Root: root}}, scan.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func popcount(w uint64) int {
	n := 0
	for ; w != 0; w &= w - 1 {
		n++
	}
	return n
}

// damageCQUnits rewrites n random units of random consume queue files
// under root (offset, size, tags, or all zero: an early end), and in
// every third damaged store removes or truncates a file.
func damageCQUnits(t *testing.T, root string, n int, seed uint64) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 3))
	files, _ := filepath.Glob(filepath.Join(root, "consumequeue", "*", "*", "*"))
	if len(files) == 0 {
		t.Fatal("no consume queue files")
	}
	for range n {
		p := files[rng.IntN(len(files))]
		b, err := os.ReadFile(p)
		if err != nil {
			continue // removed below
		}
		units := len(b) / rmq.CQUnitSize
		if units == 0 {
			continue
		}
		// mostly among the written units: find the last non-zero one
		last := units - 1
		for last > 0 && isZero(b[last*rmq.CQUnitSize:(last+1)*rmq.CQUnitSize]) {
			last--
		}
		u := b[rng.IntN(last+1)*rmq.CQUnitSize:]
		switch rng.IntN(5) {
		case 0:
			phy := int64(binary.BigEndian.Uint64(u))
			binary.BigEndian.PutUint64(u, uint64(max(phy+rng.Int64N(400)-200, 0)))
		case 1:
			binary.BigEndian.PutUint32(u[8:], uint32(rng.Int32N(300)))
		case 2:
			binary.BigEndian.PutUint64(u[12:], uint64(rng.Int64()))
		default:
			clear(u[:rmq.CQUnitSize]) // an invalid unit: the queue ends here
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	switch seed % 3 {
	case 0:
		_ = os.Truncate(files[rng.IntN(len(files))], 4*rmq.CQUnitSize+7)
	case 1:
		if len(files) > 1 {
			_ = os.Remove(files[rng.IntN(len(files))])
		}
	}
}

func isZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// TestOrBits: orBits's word-wise merge adds the same members as adding
// them one by one, at every shift, onto sets shorter and longer than the
// result.
func TestOrBits(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for k := range 2000 {
		src := make([]uint64, rng.IntN(6))
		for i := range src {
			switch rng.IntN(3) {
			case 0:
			case 1:
				src[i] = rng.Uint64()
			default:
				src[i] = 1 << rng.IntN(64)
			}
		}
		first := rng.IntN(300)
		var got, want []uint64
		for range rng.IntN(3) {
			b := rng.IntN(400)
			setBit(&got, b)
			setBit(&want, b)
		}
		for w, word := range src {
			for ; word != 0; word &= word - 1 {
				setBit(&want, first+w*64+bits.TrailingZeros64(word))
			}
		}
		orBits(&got, src, first)
		if !slices.Equal(got, want) {
			t.Fatalf("case %d: orBits(%x, first %d) = %x, want %x", k, src, first, got, want)
		}
	}
}
