package rocketmq

import (
	"slices"
	"testing"
)

// TestRecTable checks the spilled record table against the slice it
// replaces, over several blocks (more than the cache holds): every
// record, exact and in-between lookups, the cut at n, and key hashes.
func TestRecTable(t *testing.T) {
	tab, err := newRecTable()
	if err != nil {
		t.Fatal(err)
	}
	defer tab.Close()
	const n = recBlockLen*(recCacheBlocks+3) + 17
	want := make([]vrec, n)
	var hashes [][]int32
	phy := int64(1000)
	for i := range want {
		h := make([]int32, i%4)
		for j := range h {
			h[j] = int32(i*7 + j)
		}
		hashes = append(hashes, h)
		want[i] = vrec{phy: phy, queueOff: int64(i), tagsCode: -int64(i), storeTS: int64(i) << 20, size: int32(50 + i%13),
			topic: int32(i % 5), queueID: int32(i % 3), sysFlag: int32(i % 9), nhash: uint16(len(h)), flags: uint8(i % 3)}
		want[i].hashOff = tab.appendHashes(h)
		tab.append(&want[i])
		phy += int64(want[i].size)
	}
	if err := tab.finish(); err != nil {
		t.Fatal(err)
	}
	// Backwards first, so that every block is loaded again after eviction.
	for i := n - 1; i >= 0; i-- {
		if got := tab.at(i); got != want[i] {
			t.Fatalf("at(%d) = %+v, want %+v", i, got, want[i])
		}
		r := want[i]
		if got := tab.hashes(&r); !slices.Equal(got, hashes[i]) {
			t.Fatalf("hashes(%d) = %v, want %v", i, got, hashes[i])
		}
	}
	cut := n - 100
	for i := 0; i < n; i += 37 {
		p := want[i].phy
		if got := tab.lastAtOrBefore(p, n); got != i {
			t.Fatalf("lastAtOrBefore(%d) = %d, want %d", p, got, i)
		}
		if got := tab.lastAtOrBefore(p+1, n); got != i {
			t.Fatalf("lastAtOrBefore(%d+1) = %d, want %d", p, got, i)
		}
		if got, w := tab.lastAtOrBefore(p, cut), min(i, cut-1); got != w {
			t.Fatalf("lastAtOrBefore(%d, cut) = %d, want %d", p, got, w)
		}
		if got := tab.firstAtOrAfter(p + 1); got != i+1 {
			t.Fatalf("firstAtOrAfter(%d+1) = %d, want %d", p, got, i+1)
		}
	}
	if got := tab.lastAtOrBefore(want[0].phy-1, n); got != -1 {
		t.Fatalf("lastAtOrBefore below the first = %d, want -1", got)
	}
	if got := tab.firstAtOrAfter(phy); got != n {
		t.Fatalf("firstAtOrAfter past the end = %d, want %d", got, n)
	}
	if tab.err != nil {
		t.Fatal(tab.err)
	}
}
