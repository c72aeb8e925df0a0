package rabbitmq

import (
	"math/rand/v2"
	"testing"
)

// TestIDHashMatchesMap drives idHash and a Go map with the same puts
// (new ids and ids put again, 40,000 of them: the table grows from 1024
// slots to 65536) and compares every get, the count, and what each visits;
// ids sharing all but their last byte go in the same table as random ones.
func TestIDHashMatchesMap(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 5))
	model := map[[16]byte]idEntry{}
	var h idHash
	var ids [][16]byte
	for i := range 40000 {
		var id [16]byte
		switch {
		case i%10 == 9 && len(ids) > 0: // put again
			id = ids[rng.IntN(len(ids))]
		case i%10 == 8:
			id = [16]byte{0xAB, 0xCD}
			id[15], id[14] = byte(i), byte(i>>8)
		default:
			for k := range id {
				id[k] = byte(rng.UintN(256))
			}
		}
		e := idEntry{set: int32(i % 5), first: uint32(i), off: uint32(i * 3)}
		h.put(id, e)
		model[id] = e
		ids = append(ids, id)
		if i%997 == 0 {
			probe := ids[rng.IntN(len(ids))]
			if got, ok := h.get(probe); !ok || got != model[probe] {
				t.Fatalf("after %d puts: get %x = %v %v, want %v", i+1, probe, got, ok, model[probe])
			}
		}
	}
	if h.len() != len(model) {
		t.Fatalf("len %d, want %d", h.len(), len(model))
	}
	if len(h.slots) != 65536 || h.len()*4 > len(h.slots)*3 {
		t.Errorf("%d ids in %d slots", h.len(), len(h.slots))
	}
	for id, want := range model {
		if got, ok := h.get(id); !ok || got != want {
			t.Fatalf("get %x = %v %v, want %v", id, got, ok, want)
		}
	}
	var missing [16]byte
	missing[0] = 0xFF
	if _, in := model[missing]; !in {
		if e, ok := h.get(missing); ok || e != (idEntry{}) {
			t.Errorf("absent id: %v %v", e, ok)
		}
	}
	visited := map[[16]byte]bool{}
	h.each(func(id [16]byte, e idEntry) bool {
		if visited[id] || model[id] != e {
			t.Fatalf("each: %x visited twice or entry %v, want %v", id, e, model[id])
		}
		visited[id] = true
		return true
	})
	if len(visited) != len(model) {
		t.Errorf("each visited %d ids of %d", len(visited), len(model))
	}
	n := 0
	h.each(func([16]byte, idEntry) bool { n++; return n < 3 })
	if n != 3 {
		t.Errorf("each went on after false: %d calls", n)
	}
	h.free()
	if _, ok := h.get(ids[0]); ok || h.len() != 0 {
		t.Error("freed table still holds ids")
	}
	h.put(ids[0], idEntry{off: 1}) // usable again after free
	if e, ok := h.get(ids[0]); !ok || e.off != 1 {
		t.Errorf("after free: %v %v", e, ok)
	}
	h.free()
}
