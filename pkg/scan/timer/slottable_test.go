package timer

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestSlotTable: random puts, refs, gets and deletes agree with a Go map,
// including the sentinel key and keys that collide in a small table.
func TestSlotTable(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, span := range []int64{8, 100, 5000} {
		var st slotTable[int64]
		m := map[int64]int64{}
		for op := range 200000 {
			k := r.Int64N(span) - span/2
			if r.IntN(50) == 0 {
				k = math.MinInt64
			}
			switch r.IntN(4) {
			case 0:
				st.put(k, int64(op))
				m[k] = int64(op)
			case 1:
				st.del(k)
				delete(m, k)
			case 2: // ref: what get says, then a put through the pointer
				w, wok := m[k]
				p, added := st.ref(k)
				if *p != w || added == wok {
					t.Fatalf("span %d op %d key %d: ref %d added %v, want %d present %v", span, op, k, *p, added, w, wok)
				}
				*p = int64(op)
				m[k] = int64(op)
			}
			v, ok := st.get(k)
			w, wok := m[k]
			if v != w || ok != wok {
				t.Fatalf("span %d op %d key %d: got %d %v, want %d %v", span, op, k, v, ok, w, wok)
			}
			if st.len() != len(m) {
				t.Fatalf("span %d op %d: len %d, want %d", span, op, st.len(), len(m))
			}
		}
		seen := 0
		st.each(func(k, v int64) {
			if m[k] != v {
				t.Fatalf("each: %d -> %d, want %d", k, v, m[k])
			}
			seen++
		})
		if seen != len(m) {
			t.Fatalf("each saw %d keys, want %d", seen, len(m))
		}
	}
}
