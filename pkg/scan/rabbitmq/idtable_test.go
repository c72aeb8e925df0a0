package rabbitmq

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"unsafe"
)

// idSlot is an id with its entry, unpacked (the tests' fixed parts).
type idSlot struct {
	id [16]byte
	e  idEntry
}

// TestIDTableMatchesMap drives idTable and a plain map with the same
// operations (fixed ids installed after some puts, then puts and gets of
// fixed and other ids) for random ids, for ids sharing their leading
// bytes (one bucket: the binary search path; the first word of find's
// comparison, or more) and for ids one byte away from a fixed one, and
// compares every answer.
func TestIDTableMatchesMap(t *testing.T) {
	for _, tc := range []struct {
		name   string
		n      int
		prefix int // leading bytes all ids share
		skip   int // leading bytes the buckets imply (-1: any)
	}{{"empty", 0, 0, 0}, {"few", 5, 0, 0}, {"random", 5000, 0, 1}, {"one-bucket", 3000, 4, 1},
		{"one first word", 3000, 8, 1}, {"first word and a byte", 3000, 9, 1},
		{"two implied bytes", 270000, 0, 2}, {"two implied bytes, one first word", 270000, 8, 2}} {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(tc.n), 7))
			mk := func() (id [16]byte) {
				for i := range id {
					id[i] = byte(rng.UintN(256))
				}
				copy(id[:tc.prefix], []byte{0xAB, 0xCD, 0, 1, 0x80, 0, 0xFF, 7, 9})
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
			slices.SortFunc(fixed, func(a, b idSlot) int { return compareID(&a.id, &b.id) })
			// Narrow fields, so that sets, paths and offsets overflow
			// into wide entries: set 7, paths past 31 and offsets past
			// 4095 do not pack.
			pack := idPack{setBits: 3, pathBits: 5, offBits: 12}
			fx := newFixedIDs(len(fixed), pack)
			var unpacked []idSlot
			for _, sl := range fixed {
				v, ok := pack.encode(sl.e)
				fx.add(&sl.id, v)
				if !ok {
					unpacked = append(unpacked, sl)
				}
			}
			fx.done()
			if tc.skip >= 0 && fx.skip != tc.skip {
				t.Fatalf("%d ids: %d implied bytes, want %d", len(fixed), fx.skip, tc.skip)
			}
			tab.setFixed(fx, pack)
			for _, sl := range unpacked {
				tab.put(sl.id, mergeEntry(sl.e, model[sl.id]))
			}
			others := make([][16]byte, 0, 100)
			for i := 0; i < 100; i++ {
				others = append(others, mk())
				if len(fixed) > 0 {
					// A fixed id but for one byte: found only if compared whole.
					id := fixed[rng.IntN(len(fixed))].id
					id[rng.IntN(16)] ^= byte(1 + rng.UintN(255))
					others = append(others, id)
				}
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
	if unsafe.Sizeof(refSlot{}) != 20 {
		t.Errorf("refSlot is %d bytes, want 20", unsafe.Sizeof(refSlot{}))
	}
}

// TestFixedSlotBytes: the bytes a referenced id costs in the fixed part,
// for the shapes of the bench's 1 and 4 GiB stores (83,092 and 332,368
// ids, 64 and 256 files of 16 MiB, a few queue-name sets) and a store of
// small messages (2.5M ids), and a small one whose buckets imply no
// byte (100 ids); 24 before slots were packed to what the shape
// needs.
func TestFixedSlotBytes(t *testing.T) {
	for _, c := range []struct {
		ids, sets, files int
		want             int
	}{{83092, 15, 64, 20}, {332368, 15, 256, 20}, {2500000, 15, 256, 20}, {100, 3, 4, 21}} {
		f := newFixedIDs(c.ids, newIDPack(c.sets, c.files, 16<<20))
		if f.stride != c.want {
			t.Errorf("%d ids, %d files: %d bytes a slot (%d implied, %d entry), want %d",
				c.ids, c.files, f.stride, f.skip, f.vbytes, c.want)
		}
		f.free()
	}
}

// TestIDPack: entries round-trip through every packing newIDPack makes,
// up to each field's limit; one past a limit does not pack; and the
// field widths always fit 60 bits with the set field able to hold every
// set plus the wide mark.
func TestIDPack(t *testing.T) {
	for _, c := range []struct {
		sets, files int
		maxOff      int64
	}{{0, 0, 0}, {3, 64, 16 << 20}, {5000, 100000, 1 << 30}, {1 << 29, 1 << 27, 1 << 40}, {1, 0, 16 << 20}, {2, 70, 0}} {
		p := newIDPack(c.sets, c.files, c.maxOff)
		if p.setBits+p.pathBits+p.offBits+4 > 64 || p.offBits < 18 || (c.sets < 1<<29 && uint64(c.sets) >= p.wideMark()) {
			t.Errorf("%+v: widths %+v", c, p)
			continue
		}
		maxSet := min(int64(p.wideMark())-1, int64(c.sets))
		maxPath := min(int64(1)<<p.pathBits-1, maxPaths)
		maxOff := min(int64(1)<<p.offBits-1, 1<<32-1)
		for _, e := range []idEntry{{}, {set: int32(maxSet), first: uint32(maxPath) | 15<<riskShift, off: uint32(maxOff)}, {set: int32(min(1, maxSet)), off: 7}} {
			v, ok := p.encode(e)
			if got, ok2 := p.decode(v); !ok || !ok2 || got != e {
				t.Errorf("%+v: %+v packs to %x (%v), unpacks to %+v (%v)", c, e, v, ok, got, ok2)
			}
		}
		var over []idEntry
		if maxPath < maxPaths {
			e := idEntry{}
			e.setPath(int32(maxPath + 1))
			over = append(over, e)
		}
		if maxOff < 1<<32-1 {
			over = append(over, idEntry{off: uint32(maxOff + 1)})
		}
		over = append(over, idEntry{set: int32(p.wideMark())}, idEntry{set: -1})
		for _, e := range over {
			if v, ok := p.encode(e); ok {
				t.Errorf("%+v: %+v packed to %x", c, e, v)
			} else if _, ok := p.decode(v); ok {
				t.Errorf("%+v: %+v: the wide mark decodes", c, e)
			}
		}
	}
}

// BenchmarkIDTableLookup looks up ids of a fixed part of 332,368 ids (the
// 4 GiB default-mix bench store's referenced ids) and of 2,850,000 (the
// 1 GiB store of 100-200-byte bodies: a table past the L3 cache), half
// present, half not, as classify does once a record.
func BenchmarkIDTableLookup(b *testing.B) {
	for _, n := range []int{332368, 2850000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) { benchIDTableLookup(b, n, false) })
		b.Run(fmt.Sprint(n, "-warm"), func(b *testing.B) { benchIDTableLookup(b, n, true) })
	}
}

func benchIDTableLookup(b *testing.B, n int, warm bool) {
	rng := rand.New(rand.NewPCG(1, 2))
	ids := make([][16]byte, n)
	for i := range ids {
		for k := range ids[i] {
			ids[i][k] = byte(rng.UintN(256))
		}
	}
	slices.SortFunc(ids, func(a, b [16]byte) int { return compareID(&a, &b) })
	ids = slices.Compact(ids)
	pack := newIDPack(15, 256, 16<<20)
	fx := newFixedIDs(len(ids), pack)
	for i := range ids {
		v, _ := pack.encode(idEntry{set: int32(i%15) + 1})
		fx.add(&ids[i], v)
	}
	fx.done()
	tab := newIDTable()
	tab.setFixed(fx, pack)
	defer tab.free()
	probes := make([][16]byte, 1<<20)
	for i := range probes {
		if i%2 == 0 {
			probes[i] = ids[rng.IntN(len(ids))]
		} else {
			for k := range probes[i] {
				probes[i][k] = byte(rng.UintN(256))
			}
		}
	}
	b.ResetTimer()
	found := 0
	for i := range b.N {
		j := i & (len(probes) - 1)
		if warm && j%warmBatch == 0 {
			tab.warm(warmBatch, func(k int) *[16]byte { return &probes[j+k] })
		}
		if slot, _ := tab.lookup(probes[j]); slot >= 0 {
			found++
		}
	}
	if b.N >= len(probes) && found < b.N/3 {
		b.Fatalf("%d of %d found", found, b.N)
	}
}
