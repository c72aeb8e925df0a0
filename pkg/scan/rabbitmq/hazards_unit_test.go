package rabbitmq

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"testing"
)

// frame is a hand-built .rdq record: the 8-byte big-endian Size (16-byte
// id + body), the id, the body, the 0xFF marker.
func frame(id byte, body []byte) []byte {
	b := binary.BigEndian.AppendUint64(nil, uint64(16+len(body)))
	b = append(b, bytes.Repeat([]byte{id}, 16)...)
	b = append(b, body...)
	return append(b, 0xFF)
}

// TestOffByNineRule: offByNine on hand-built bytes. The rule: a scanner
// that tests position p byte by byte with R = bytes from p to EOF takes
// the 8 bytes there as a Size v and, with the old bound, stops for good
// when R-8 <= v <= R-1 (v < R, v+8 >= R); every record after p is lost.
// A window in a gap is tested by generation 2 and 3 (versions
// 3.13.1-4.1.4), one inside an unreferenced record only by generation 3
// before 4.1.5 (4.0.3-4.1.4), which then loses only the live records.
func TestOffByNineRule(t *testing.T) {
	y := frame(0x59, bytes.Repeat([]byte{0x41}, 20)) // referenced, after the window
	n := 8 + len(y)                                  // the file: an 8-byte gap window at 0, then y
	for _, c := range []struct {
		v    uint64
		fire bool
	}{
		{uint64(n - 9), false}, // v+8 = R-1 < R: the scanner reads on
		{uint64(n - 8), true},  // the lowest v the old bound takes
		{uint64(n - 4), true},
		{uint64(n - 1), true},
		{uint64(n), false}, // v = R: not below R
	} {
		b := binary.BigEndian.AppendUint64(nil, c.v)
		b = append(b, y...)
		recs := []HazardRecord{{Offset: 8, TotalSize: int64(len(y)), MsgID: [16]byte(bytes.Repeat([]byte{0x59}, 16)), Status: StatusReferenced}}
		hs := offByNine(b, recs, []Gap{{Offset: 0, Length: 8}}, nil, nil)
		if !c.fire {
			if len(hs) != 0 {
				t.Errorf("v = %d, R = %d: %d hazards, want none", c.v, n, len(hs))
			}
			continue
		}
		if len(hs) != 1 {
			t.Fatalf("v = %d, R = %d: %d hazards, want 1", c.v, n, len(hs))
		}
		h := hs[0]
		if h.Code != CodeOffByNine || h.Offset != 0 || h.Length != 8 || h.Versions != "3.13.1-4.1.4" ||
			fmt.Sprint(h.Gens) != "[2 3]" || len(h.Victims) != 1 || h.Victims[0].Offset != 8 ||
			h.Details["value"] != c.v || h.Details["bytes_to_eof"] != n {
			t.Errorf("v = %d, R = %d: hazard %+v", c.v, n, h)
		}
	}

	// Inside an unreferenced record x: generation 3 only, and of the
	// records after the window only the live one (z, referenced) is lost,
	// not the unreferenced w.
	body := bytes.Repeat([]byte{0x42}, 40)
	x := frame(0x58, body)
	w := frame(0x57, body)
	z := frame(0x5A, body)
	file := append(append(append([]byte(nil), x...), w...), z...)
	p := 24 + 10 // in x's body
	binary.BigEndian.PutUint64(file[p:], uint64(len(file)-p-2))
	recs := []HazardRecord{
		{Offset: 0, TotalSize: int64(len(x)), MsgID: [16]byte(bytes.Repeat([]byte{0x58}, 16)), Status: StatusUnreferenced},
		{Offset: int64(len(x)), TotalSize: int64(len(w)), MsgID: [16]byte(bytes.Repeat([]byte{0x57}, 16)), Status: StatusUnreferenced},
		{Offset: int64(len(x) + len(w)), TotalSize: int64(len(z)), MsgID: [16]byte(bytes.Repeat([]byte{0x5A}, 16)), Status: StatusReferenced},
	}
	hs := offByNine(file, recs, nil, nil, nil)
	if len(hs) != 1 || hs[0].Offset != int64(p) || hs[0].Versions != "4.0.3-4.1.4" || fmt.Sprint(hs[0].Gens) != "[3]" ||
		len(hs[0].Victims) != 1 || hs[0].Victims[0].Offset != int64(len(x)+len(w)) {
		t.Errorf("window in an unreferenced record: %+v", hs)
	}
	// The same bytes with x referenced: no scanner walks inside it.
	recs[0].Status = StatusReferenced
	if hs := offByNine(file, recs, nil, nil, nil); len(hs) != 0 {
		t.Errorf("window in a referenced record: %+v, want none", hs)
	}
}

// TestPredicted34Rule: predicted34 on hand-built bytes. The §3.4 rule: a
// record whose Size S is preceded by k >= 1 zero bytes is misread at
// off-j (1 <= j <= k) when the 8 bytes there, read as a Size, give
// C = S>>8j >= 16 and the byte at off-j+8+C (the bogus frame's marker)
// is 0xFF; the bogus frame is C+9 bytes.
func TestPredicted34Rule(t *testing.T) {
	body := make([]byte, 0x1234-16) // S = 0x1234: the 8 bytes at off-1 are 00 00..00 12, C = 0x12 = 18
	rec := frame(0x61, body)
	b := append([]byte{0}, rec...) // one zero byte before the record at 1
	recs := []HazardRecord{{Offset: 1, TotalSize: int64(len(rec)), MsgID: [16]byte(bytes.Repeat([]byte{0x61}, 16)), Status: StatusReferenced}}
	marker := 1 - 1 + 8 + 0x12 // off-j+8+C: body byte 1 of the record

	if got := predicted34(b, recs); len(got) != 0 {
		t.Errorf("marker byte %#x: predicted %v, want none", b[marker], got)
	}
	b[marker] = 0xFF
	if got := predicted34(b, recs); len(got) != 1 || got[0] != 0x12+9 {
		t.Errorf("marker 0xFF: predicted %v, want {0: %d}", got, 0x12+9)
	}
	// No zero byte before the record: no position to misread from.
	if got := predicted34(b[1:], []HazardRecord{{Offset: 0, TotalSize: int64(len(rec))}}); len(got) != 0 {
		t.Errorf("no hole: predicted %v, want none", got)
	}
	// S < 16<<8: C = S>>8 < 16, which no scanner takes as a Size.
	small := frame(0x62, make([]byte, 0x0FFF-16))
	sb := append([]byte{0}, small...)
	sb[1+8+0x0F-1] = 0xFF
	if got := predicted34(sb, []HazardRecord{{Offset: 1, TotalSize: int64(len(small))}}); len(got) != 0 {
		t.Errorf("C = 15: predicted %v, want none", got)
	}
}

// TestOffByNineHitsBruteForce: offByNineHits's jumps (next4Zero to 4
// zero bytes, the zero-window skip) find the same first hits as testing
// every position of every region with obnHit, on random bytes full of
// zero bytes, zero runs and planted off-by-nine values, regions at the
// file's start and end included; next4Zero itself against a byte loop.
func TestOffByNineHitsBruteForce(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 7))
	for iter := range 3000 {
		n := 16 + rng.IntN(600)
		b := make([]byte, n)
		for i := range b {
			if rng.IntN(3) > 0 {
				b[i] = byte(rng.IntN(4)) // mostly 0..3: many zeros and near-zero words
			} else {
				b[i] = byte(rng.Uint32())
			}
		}
		for range rng.IntN(3) { // a zero run
			at := rng.IntN(n)
			clear(b[at:min(n, at+rng.IntN(40))])
		}
		for range rng.IntN(3) { // an off-by-nine value
			if at := rng.IntN(n); n-at >= 8 {
				binary.BigEndian.PutUint64(b[at:], uint64(n-at-1-rng.IntN(8)))
			}
		}
		var regs []obnRegion
		for p := 0; p < n; {
			l := 1 + rng.IntN(80)
			if rng.IntN(2) == 0 {
				regs = append(regs, obnRegion{p, min(n, p+l), rng.IntN(2) == 0})
			}
			p += l + rng.IntN(20)
		}
		w2, w3 := -1, -1
		for _, g := range regs {
			for p := g.from; p < g.to; p++ {
				if obnHit(b, p) {
					if w3 < 0 {
						w3 = p
					}
					if g.gap && w2 < 0 {
						w2 = p
					}
				}
			}
		}
		if p2, p3 := offByNineHits(b, regs, nil); p2 != w2 || p3 != w3 {
			t.Fatalf("iteration %d: hits %d, %d; every position tested: %d, %d", iter, p2, p3, w2, w3)
		}
		from := rng.IntN(n)
		to := from + rng.IntN(n-from+1)
		want := -1
		for q := from; q < to && q+8 <= n; q++ {
			if b[q]|b[q+1]|b[q+2]|b[q+3] == 0 {
				want = q - from
				break
			}
		}
		if got := next4Zero(b, from, to); got != want {
			t.Fatalf("iteration %d: next4Zero(%d, %d) = %d, want %d", iter, from, to, got, want)
		}
	}
}
