package rabbitmq

import (
	"math/rand/v2"
	"testing"
	"unsafe"

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
				seen := idEntry{off: 99}
				seen.setPath(3)
				seen.addRisk(4)
				e := idEntry{set: fixed[0].e.set, first: seen.first, off: 99}
				tab.put(fixed[0].id, seen)
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
					e.setPath(int32(step%50) + 1)
					e.addRisk(uint8(step % 16))
					e.off = uint32(step)
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

// TestIDEntryBits: the first copy's file index and the at-risk bits share
// a word without touching each other, over the whole range of both.
func TestIDEntryBits(t *testing.T) {
	if len(atRiskKeys) > 32-riskShift {
		t.Fatalf("%d at-risk keys, idEntry holds %d bits", len(atRiskKeys), 32-riskShift)
	}
	for _, p := range []int32{0, 1, 2, 12345, maxPaths - 1, maxPaths} {
		for _, r := range []uint8{0, 1, 5, 15} {
			var e idEntry
			e.addRisk(r)
			e.setPath(p)
			if e.path() != p || e.risk() != r {
				t.Errorf("path %d risk %d: got %d, %d", p, r, e.path(), e.risk())
			}
			e.setPath(7)
			e.addRisk(2)
			if e.path() != 7 || e.risk() != r|2 {
				t.Errorf("after setPath(7) addRisk(2): %d, %d", e.path(), e.risk())
			}
		}
	}
	if unsafe.Sizeof(idSlot{}) != 28 {
		t.Errorf("idSlot is %d bytes, want 28", unsafe.Sizeof(idSlot{}))
	}
}
