package bitset

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestSet: Add, Has and Each agree with a map for random sets, word
// boundaries included.
func TestSet(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for trial := range 200 {
		n := int64(1 + r.IntN(300))
		s := New(n)
		want := map[int64]bool{}
		for range r.IntN(400) {
			i := r.Int64N(n)
			s.Add(i)
			want[i] = true
		}
		var got []int64
		s.Each(func(i int64) { got = append(got, i) })
		if !slices.IsSorted(got) || len(got) != len(want) {
			t.Fatalf("trial %d: Each gave %v for %d members", trial, got, len(want))
		}
		for i := range n {
			if s.Has(i) != want[i] {
				t.Fatalf("trial %d: Has(%d) = %v", trial, i, s.Has(i))
			}
		}
	}
}
