package prefetch

import "testing"

// TestInt32s: prefetching changes nothing and takes any index, in range
// or not, and empty slices.
func TestInt32s(t *testing.T) {
	tab := make([]int32, 1000)
	for i := range tab {
		tab[i] = int32(i)
	}
	Int32s(tab, []int64{0, 999, 1000, -1, 1 << 62, 500})
	Int32s(nil, []int64{1})
	Int32s(tab, nil)
	for i, v := range tab {
		if v != int32(i) {
			t.Fatalf("tab[%d] = %d", i, v)
		}
	}
}
