package rabbitmq

import (
	"encoding/binary"
	"math/rand/v2"
	"testing"
)

// offByNineBytewise is offByNineHits testing every zero byte of every
// region (no zero-run skip): the reference the skip must agree with.
func offByNineBytewise(b []byte, regs []obnRegion) (p2, p3 int) {
	p2, p3 = -1, -1
	for _, g := range regs {
		for p := g.from; p < g.to && p < len(b) && (p2 < 0 || p3 < 0); p++ {
			if b[p] != 0 || !obnHit(b, p) {
				continue
			}
			if p3 < 0 {
				p3 = p
			}
			if g.gap && p2 < 0 {
				p2 = p
			}
		}
	}
	return p2, p3
}

// obnCase makes a file of random bytes, zero runs (some to EOF) and
// planted off-by-nine values, and random regions over it.
func obnCase(r *rand.Rand, b []byte) []obnRegion {
	n := len(b)
	for i := range b {
		b[i] = byte(r.UintN(256))
	}
	for range r.IntN(8) {
		from := r.IntN(n)
		to := min(n, from+r.IntN(64))
		if r.IntN(4) == 0 {
			to = n
		}
		clear(b[from:to])
	}
	for range r.IntN(3) {
		if p := r.IntN(n); n-p >= 8 {
			binary.BigEndian.PutUint64(b[p:], uint64(n-p-1-r.IntN(8)))
		}
	}
	var regs []obnRegion
	for range 1 + r.IntN(4) {
		from := r.IntN(n)
		regs = append(regs, obnRegion{from, min(n, from+r.IntN(n)), r.IntN(2) == 0})
	}
	return regs
}

// TestOffByNineZeroRunSkip: on random files with zero runs (inside, at
// and to EOF) and planted values, offByNineHits finds the hits the
// byte-by-byte test finds.
func TestOffByNineZeroRunSkip(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 9))
	found := 0
	for i := range 20000 {
		b := make([]byte, 1+r.IntN(300))
		regs := obnCase(r, b)
		w2, w3 := offByNineBytewise(b, regs)
		g2, g3 := offByNineHits(b, regs, nil)
		if g2 != w2 || g3 != w3 {
			t.Fatalf("case %d (%d bytes, regions %v): hits %d/%d, byte by byte %d/%d", i, len(b), regs, g2, g3, w2, w3)
		}
		if w3 >= 0 {
			found++
		}
	}
	if found < 1000 {
		t.Fatalf("vacuous: %d cases with a hit", found)
	}
}

// FuzzOffByNine: for any bytes and regions the skip finds what the byte
// by byte test finds.
func FuzzOffByNine(f *testing.F) {
	f.Add(make([]byte, 40), uint16(0), uint16(40), true)
	f.Add(append(make([]byte, 31), 9), uint16(3), uint16(32), false)
	f.Fuzz(func(t *testing.T, b []byte, from, length uint16, gap bool) {
		if len(b) == 0 {
			return
		}
		fr := int(from) % len(b)
		regs := []obnRegion{{fr, min(len(b), fr+int(length)), gap}}
		w2, w3 := offByNineBytewise(b, regs)
		if g2, g3 := offByNineHits(b, regs, nil); g2 != w2 || g3 != w3 {
			t.Fatalf("hits %d/%d, byte by byte %d/%d", g2, g3, w2, w3)
		}
	})
}
