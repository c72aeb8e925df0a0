package timer

import (
	"math"
	"math/rand"
	"sort"
	"testing"

	ftimer "github.com/storectl/storectl/pkg/format/timer"
)

// TestFileOfLayouts: fileOf's direct index is the search's answer, and
// setStep and isUnitNear are setValid and isUnit, for adjacent files of
// the mapped size, a missing file, a short file, an oversized file that
// the next overlaps, and offsets before, between, inside and past them.
func TestFileOfLayouts(t *testing.T) {
	const size = 100 * ftimer.UnitSize
	layouts := map[string][][2]int64{ // base, size
		"adjacent": {{0, size}, {size, size}, {2 * size, size}},
		"gap":      {{0, size}, {2 * size, size}, {3 * size, size}},
		"short":    {{0, size}, {size, size / 2}, {2 * size, size}},
		"overlap":  {{0, size}, {size, 2 * size}, {2 * size, size}},
		"late":     {{3 * size, size}, {4 * size, size}},
		"one":      {{0, size}},
	}
	rng := rand.New(rand.NewSource(1))
	for name, lay := range layouts {
		newScanner := func() *scanner {
			s := &scanner{logSize: size}
			for _, l := range lay {
				s.files = append(s.files, logFile{base: l[0], size: l[1], step: l[0] / size * (size/ftimer.UnitSize + 1)})
			}
			return s
		}
		a, b := newScanner(), newScanner()
		search := func(off int64) int {
			i := sort.Search(len(a.files), func(i int) bool { return a.files[i].base > off }) - 1
			if i < 0 || off >= a.files[i].base+a.files[i].size {
				return -1
			}
			return i
		}
		for off := int64(-2 * ftimer.UnitSize); off < 6*size; off += ftimer.UnitSize / 4 {
			if got, want := a.fileOf(off), search(off); got != want {
				t.Fatalf("%s: fileOf(%d) = %d, want %d", name, off, got, want)
			}
		}
		// Units at random steps of every file: setStep into a, setValid into b.
		for i, f := range a.files {
			for range 300 {
				pos := rng.Int63n(f.size/ftimer.UnitSize) * ftimer.UnitSize
				a.setStep(i, pos)
				b.setValid(f.base + pos)
			}
		}
		if len(a.validPos) != len(b.validPos) {
			t.Fatalf("%s: setStep marked %d words, setValid %d", name, len(a.validPos), len(b.validPos))
		}
		for k := range a.validPos {
			if a.validPos[k] != b.validPos[k] {
				t.Fatalf("%s: word %d: setStep %x, setValid %x", name, k, a.validPos[k], b.validPos[k])
			}
		}
		for i := range a.files {
			for off := int64(-ftimer.UnitSize); off < 6*size; off += ftimer.UnitSize / 2 {
				if got, want := a.isUnitNear(i, off), a.isUnit(off); got != want {
					t.Fatalf("%s: isUnitNear(%d, %d) = %v, isUnit %v", name, i, off, got, want)
				}
			}
		}
	}
}

// TestKeeps: Prepass.keeps is the slot time test it stands for, around
// keepFrom and for negative and extreme deliver times.
func TestKeeps(t *testing.T) {
	for _, prec := range []int64{1, 7, 1000} {
		for _, from := range []int64{math.MaxInt64, 0, 1, 999, 1000, 1796163818000, -5000} {
			p := &Prepass{keepFrom: from, precision: prec}
			ds := []int64{math.MinInt64, math.MinInt64 + 1, -1001, -1000, -1, 0, 1, math.MaxInt64, math.MaxInt64 - 1}
			for d := from - 3*prec; d < from+3*prec && d >= from-3*prec; d++ {
				ds = append(ds, d)
			}
			for _, d := range ds {
				if got, want := p.keeps(d), d/prec*prec >= from; got != want {
					t.Fatalf("keeps(%d) precision %d from %d = %v, want %v", d, prec, from, got, want)
				}
			}
		}
	}
}
