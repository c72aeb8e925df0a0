package rabbitmq

import (
	"math/rand/v2"
	"testing"

	"github.com/storectl/storectl/internal/offheap"
)

// TestIDTableMatchesMap drives idTable and a plain map with the same
// operations (fixed ids installed after some puts, then puts and gets of
// fixed and other ids) for random ids and for ids sharing their leading
// bytes (one bucket: the binary search path), and compares every answer.
func TestIDTableMatchesMap(t *testing.T) {
	for _, tc := range []struct {
		name   string
		n      int
		prefix bool
	}{{"empty", 0, false}, {"few", 5, false}, {"random", 5000, false}, {"one-bucket", 3000, true}} {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(tc.n), 7))
			mk := func() (id [16]byte) {
				for i := range id {
					id[i] = byte(rng.UintN(256))
				}
				if tc.prefix {
					id[0], id[1], id[2], id[3] = 0xAB, 0xCD, 0, 1
				}
				return id
			}
			model := map[[16]byte]idEntry{}
			tab := newIDTable()
			var fixed []idSlot
			for i := 0; i < tc.n; i++ {
				id := mk()
				if _, dup := model[id]; dup {
					continue
				}
				e := idEntry{set: int32(i%7) + 1}
				model[id] = e
				fixed = append(fixed, idSlot{id: id, e: e})
			}
			// One fixed id seen before the table is installed.
			if len(fixed) > 0 {
				e := idEntry{set: fixed[0].e.set, path: 3, off: 99}
				tab.put(fixed[0].id, idEntry{path: 3, off: 99})
				model[fixed[0].id] = e
			}
			sortSlots(fixed)
			buf := offheap.New[idSlot]()
			for _, sl := range fixed {
				buf.Append(sl)
			}
			tab.setSorted(buf)
			others := make([][16]byte, 0, 100)
			for i := 0; i < 100; i++ {
				others = append(others, mk())
			}
			for step := 0; step < 20000; step++ {
				var id [16]byte
				if len(fixed) > 0 && rng.IntN(2) == 0 {
					id = fixed[rng.IntN(len(fixed))].id
				} else {
					id = others[rng.IntN(len(others))]
				}
				if rng.IntN(3) == 0 {
					e := model[id]
					e.path, e.off = int32(step%50)+1, uint32(step)
					model[id] = e
					tab.put(id, e)
				}
				if got, want := tab.get(id), model[id]; got != want {
					t.Fatalf("step %d: get(%x) = %+v, want %+v", step, id, got, want)
				}
			}
			n := 0
			tab.each(func(id [16]byte, e idEntry) bool {
				if model[id] != e {
					t.Errorf("each: %x = %+v, want %+v", id, e, model[id])
				}
				n++
				return true
			})
			if n != len(model) {
				t.Errorf("each visited %d ids, want %d", n, len(model))
			}
		})
	}
}
