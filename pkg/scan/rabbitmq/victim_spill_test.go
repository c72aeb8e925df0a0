package rabbitmq

import (
	"encoding/json"
	"math"
	"reflect"
	"testing"
)

// spillAll makes the scan spill every victim list (tests then read
// spilled lists back); it returns the undo.
func spillAll() func() {
	old := spillMinVictims
	spillMinVictims = 1
	return func() { spillMinVictims = old }
}

// spillNone makes the scan keep every victim list in memory; it returns
// the undo.
func spillNone() func() {
	old := spillMinVictims
	spillMinVictims = math.MaxInt
	return func() { spillMinVictims = old }
}

// TestVictimSpillRoundTrip: lists written to the spill come back
// identical (ids, offsets up to 2^62, sizes, every status), in order,
// across read chunks, with the same JSON as the in-memory list; the
// hazard answers count, first victim and "referenced" without reading.
func TestVictimSpillRoundTrip(t *testing.T) {
	var sp victimSpill
	var lists []Victims
	for n, l := range []int{1, 3, spillReadChunk + 5} {
		var vs Victims
		for i := range l {
			var id [16]byte
			id[0], id[15] = byte(n), byte(i)
			id[7] = byte(i >> 8)
			vs = append(vs, Victim{ID: id, Offset: int64(i) << 40, Size: int64(i*7 + 25),
				Status: statusCodes[(i+n)%len(statusCodes)]})
		}
		lists = append(lists, vs)
	}
	lists[0][0].Status = StatusUnreferenced // a list with no referenced victim
	var hs []Hazard
	for _, vs := range lists {
		sv, ok := sp.put(vs)
		if !ok {
			t.Fatal("spill refused a list")
		}
		hs = append(hs, Hazard{spill: sv})
	}
	for i, h := range hs {
		var got Victims
		if err := h.EachVictim(func(v Victim) { got = append(got, v) }); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, lists[i]) {
			t.Errorf("list %d: %d victims back, want %d (or they differ)", i, len(got), len(lists[i]))
		}
		mem := Hazard{Victims: lists[i]}
		a, _ := json.Marshal(map[string]any{"v": h.victimHead()})
		b, _ := json.Marshal(map[string]any{"v": mem.victimHead()})
		la, _ := h.lastVictim()
		lb, _ := mem.lastVictim()
		if string(a) != string(b) || la != lb {
			t.Errorf("list %d: inline victims or last differ", i)
		}
		if h.VictimCount() != mem.VictimCount() || h.liveVictims() != mem.liveVictims() {
			t.Errorf("list %d: count %d/%d live %d/%d", i, h.VictimCount(), mem.VictimCount(), h.liveVictims(), mem.liveVictims())
		}
		if f, _ := h.firstVictim(); f != lists[i][0] {
			t.Errorf("list %d: first %+v", i, f)
		}
	}
	if hs[0].liveVictims() != 0 {
		t.Error("list 0 has no referenced victim")
	}
}

// TestVictimSpillUnusable: when no temp file can be made, lists stay in
// memory (put says no) and nothing fails.
func TestVictimSpillUnusable(t *testing.T) {
	t.Setenv("TMPDIR", "/nonexistent/storectl-test")
	var sp victimSpill
	if _, ok := sp.put(Victims{{Status: StatusReferenced}}); ok {
		t.Fatal("spill into a missing TMPDIR succeeded")
	}
	fs := &FileScan{Hazards: []Hazard{{Code: CodeGen1Stop, Victims: make(Victims, 300)}}}
	for i := range fs.Hazards[0].Victims {
		fs.Hazards[0].Victims[i].Status = StatusReferenced
	}
	s := &scanner{spill: &victimSpill{}}
	s.spillVictims(fs)
	if h := fs.Hazards[0]; h.spill != nil || len(h.Victims) != 300 {
		t.Errorf("unusable spill: spilled %v, %d in memory", h.spill != nil, len(h.Victims))
	}
}
