package rabbitmq

import (
	"bytes"
	"cmp"
	"math/rand/v2"
	"slices"
	"testing"
)

func randomSlots(n int, seed uint64, dupEvery int) []refSlot {
	r := rand.New(rand.NewPCG(seed, 1))
	s := make([]refSlot, n)
	for i := range s {
		if dupEvery > 0 && i > 0 && i%dupEvery == 0 {
			s[i].id = s[r.IntN(i)].id
		} else {
			for k := range s[i].id {
				s[i].id[k] = byte(r.Uint32())
			}
		}
		s[i].q = int32(r.IntN(5))
	}
	return s
}

// BenchmarkSortByID sorts 350,000 references (the 4 GiB default-mix bench
// store's) and 3,000,000 with every fourth id a copy (about the 1 GiB store
// of 100-200-byte bodies').
func BenchmarkSortByID(b *testing.B) {
	b.Run("350k", func(b *testing.B) { benchSortByID(b, randomSlots(350_000, 1, 0)) })
	b.Run("3M", func(b *testing.B) { benchSortByID(b, randomSlots(3_000_000, 1, 4)) })
}

func benchSortByID(b *testing.B, src []refSlot) {
	s := make([]refSlot, len(src))
	b.Run("radix", func(b *testing.B) {
		for b.Loop() {
			copy(s, src)
			sortRefs(s)
		}
	})
	b.Run("pdq", func(b *testing.B) {
		for b.Loop() {
			copy(s, src)
			slices.SortFunc(s, func(a, b refSlot) int {
				if c := compareID(&a.id, &b.id); c != 0 {
					return c
				}
				return cmp.Compare(a.q, b.q)
			})
		}
	})
}

// TestSortByID checks the radix sort against a comparison sort on inputs
// that exercise each path: short (insertion sort), long random ids (one
// radix pass), many copies of a few ids (buckets sorted by tie), ids that
// share their first bytes (passes on later bytes), and all ids equal.
func TestSortByID(t *testing.T) {
	sharedPrefix := func(n int) []refSlot {
		s := randomSlots(n, 3, 0)
		for i := range s {
			copy(s[i].id[:9], "commonpre") // only the last 7 bytes differ
		}
		return s
	}
	allSame := func(n int) []refSlot {
		s := randomSlots(n, 4, 0)
		for i := range s {
			s[i].id = s[0].id
		}
		return s
	}
	cases := map[string][]refSlot{
		"empty":         nil,
		"one":           randomSlots(1, 1, 0),
		"short":         randomSlots(50, 2, 0),
		"random":        randomSlots(100_000, 5, 0),
		"duplicates":    randomSlots(20_000, 6, 3),
		"shared prefix": sharedPrefix(5_000),
		"all equal":     allSame(3_000),
	}
	want := func(s []refSlot) []refSlot {
		s = slices.Clone(s)
		slices.SortFunc(s, func(a, b refSlot) int {
			if c := bytes.Compare(a.id[:], b.id[:]); c != 0 {
				return c
			}
			return cmp.Compare(a.q, b.q)
		})
		return s
	}
	for name, in := range cases {
		got := slices.Clone(in)
		sortRefs(got)
		if w := want(in); !slices.Equal(got, w) {
			i := 0
			for i < len(w) && got[i] == w[i] {
				i++
			}
			t.Errorf("%s (%d ids): differs from a comparison sort first at %d", name, len(in), i)
		}
	}
}
