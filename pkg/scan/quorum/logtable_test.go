package quorum

import "testing"

// TestLogTable checks the packed log against what the map it replaced
// did: a WAL entry wins over a segment entry of the same index, a later
// segment entry over an earlier one, truncateAbove drops only the higher
// indexes, and Each visits every index once in increasing order, across
// pages.
func TestLogTable(t *testing.T) {
	var nilT *logTable
	if nilT.Get(1) != nil || nilT.Len() != 0 {
		t.Fatal("a nil table holds entries")
	}
	lt := newLogTable(nil)
	wal := lt.file("/d/00000001.wal", "00000001.wal")
	s1 := lt.file("/d/q/00000001.segment", "q/00000001.segment")
	s2 := lt.file("/d/q/00000002.segment", "q/00000002.segment")
	if lt.file("/d/00000001.wal", "x") != wal {
		t.Fatal("a file got two numbers")
	}
	w := EntryLoc{Path: "/d/00000001.wal", Rel: "00000001.wal", Offset: 100, Length: 30, Record: 80, RecSize: 50, Index: 3000, Term: 7, InWAL: true, OK: true}
	lt.put(wal, &w, false)
	for i := uint64(1); i <= 3000; i++ {
		l := EntryLoc{Offset: int64(i) * 10, Length: uint32(i), Record: int64(i), Index: i, Term: 6, Slot: int(i % 4096), OK: i%2 == 0}
		lt.put(s1, &l, true)
		if i > 2000 {
			l.Offset++
			lt.put(s2, &l, true)
		}
	}
	if lt.Len() != 3000 {
		t.Fatalf("Len %d, want 3000", lt.Len())
	}
	if g := lt.Get(3000); g == nil || *g != w {
		t.Fatalf("index 3000: %+v, want the WAL entry %+v", g, w)
	}
	want := EntryLoc{Path: "/d/q/00000002.segment", Rel: "q/00000002.segment", Offset: 25011, Length: 2501, Record: 2501, Index: 2501, Term: 6, Slot: 2501, OK: false}
	if g := lt.Get(2501); g == nil || *g != want {
		t.Fatalf("index 2501: %+v, want %+v", g, want)
	}
	if g := lt.Get(12); g == nil || g.Rel != "q/00000001.segment" || !g.OK || g.Offset != 120 {
		t.Fatalf("index 12: %+v", g)
	}
	if lt.Get(0) != nil || lt.Get(3001) != nil || lt.Get(1<<40) != nil {
		t.Fatal("an index never put is in the table")
	}
	lt.truncateAbove(1500)
	if lt.Len() != 1500 || lt.Get(1501) != nil || lt.Get(1500) == nil {
		t.Fatalf("after truncateAbove(1500): Len %d", lt.Len())
	}
	var prev uint64
	n := 0
	lt.Each(func(idx uint64, l *EntryLoc) {
		if idx != prev+1 || l.Index != idx {
			t.Fatalf("Each: %d after %d (loc index %d)", idx, prev, l.Index)
		}
		prev = idx
		n++
	})
	if n != 1500 {
		t.Fatalf("Each visited %d, want 1500", n)
	}
}
