package rocketmq

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestRecTable checks the spilled record table against the slice it
// replaces: records of four "files" whose writers interleave their blocks
// in the temp files (as files walked in parallel do), adopted in file
// order with their own topic maps, over more blocks than the cache holds
// and with partial blocks at each file's end: every record, exact and
// in-between lookups, the cut at n, key hashes and the newest store time.
// The records' shapes give wide blocks (store times 2^31 ms apart), compact
// ones (encodeBlock) and a mix (a gap between two records, ids and
// values past the compact widths here and there).
func TestRecTable(t *testing.T) {
	for _, shape := range []string{"wide", "compact", "mixed"} {
		t.Run(shape, func(t *testing.T) { testRecTable(t, shape) })
	}
}

func testRecTable(t *testing.T, shape string) {
	tab, err := newRecTable()
	if err != nil {
		t.Fatal(err)
	}
	defer tab.Close()
	sizes := []int{recBlockLen*5 + 17, 3, recBlockLen * 2, recBlockLen*4 + 1000}
	n := 0
	for _, s := range sizes {
		n += s
	}
	want := make([]vrec, 0, n)
	var hashes [][]int32
	writers := make([]*blockWriter, len(sizes))
	local := make([][]vrec, len(sizes)) // per file, as its writer got them
	phy := int64(1000)
	for f, size := range sizes {
		writers[f] = &blockWriter{t: tab}
		for i := 0; i < size; i++ {
			g := len(want)
			h := make([]int32, g%4)
			for j := range h {
				h[j] = int32(g*7 + j)
			}
			hashes = append(hashes, h)
			r := vrec{phy: phy, queueOff: int64(g), tagsCode: -int64(g), storeTS: int64(g%5000) << 31, size: int32(50 + g%13),
				topic: int32(f*10 + g%5), queueID: int32(g % 3), sysFlag: int32(g % 9), nhash: uint16(len(h)), flags: uint8(g % 3)}
			ltopic := int32(g % 5) // the file's own topic ids
			if shape != "wide" {
				r.storeTS = 1<<40 + int64(g%5000)
				r.tagsCode = int64(g%7) - 3
				r.queueOff = 1<<33 + int64(g)
			}
			if shape == "mixed" {
				switch g % 1500 {
				case 100:
					phy += 7 // a gap before the record
				case 400:
					r.queueID = 1 << 16
				case 500:
					r.sysFlag = -1
				case 600:
					r.tagsCode = 1 << 40
				case 700:
					r.storeTS = -1
				case 800:
					r.size = -3 // fits the compact form
				case 900:
					r.queueOff = 0
				case 1000:
					ltopic = 1 << 16
				}
				r.phy = phy
			}
			want = append(want, r)
			phy += int64(r.size)
			lr := r
			lr.topic = ltopic
			local[f] = append(local[f], lr)
		}
	}
	// Interleave the writers: a record of each file in turn.
	for i := 0; ; i++ {
		more := false
		for f := range sizes {
			if i < len(local[f]) {
				w := writers[f]
				r := local[f][i]
				g := indexOf(sizes, f, i)
				r.hashOff = int64(len(w.hashes))
				w.hashes = append(w.hashes, hashes[g]...)
				w.add(r)
				more = true
			}
		}
		if !more {
			break
		}
	}
	for f := range sizes {
		ids := make([]int32, 1<<16+1)
		for k := range 5 {
			ids[k] = int32(f*10 + k)
		}
		ids[1<<16] = int32(f*10 + 1000%5) // the "mixed" record's wide local id
		if first := tab.adopt(writers[f], ids); first != indexOf(sizes, f, 0) {
			t.Fatalf("file %d adopted at %d", f, first)
		}
	}
	if err := tab.finish(); err != nil {
		t.Fatal(err)
	}
	if tab.n != n {
		t.Fatalf("%d records adopted, want %d", tab.n, n)
	}
	compact := 0
	for _, b := range tab.blocks {
		if b.compact {
			compact++
		}
	}
	if want := map[string]bool{"wide": compact == 0, "compact": compact == len(tab.blocks),
		"mixed": compact > 0 && compact < len(tab.blocks)}[shape]; !want {
		t.Fatalf("%d of %d blocks compact", compact, len(tab.blocks))
	}
	for i := range want {
		want[i].hashOff = 0 // compared apart: offsets in the table's file
	}
	for _, cut := range []int{n, n - 100, recBlockLen*5 + 10} {
		var m int64
		for _, r := range want[:cut] {
			m = max(m, r.storeTS)
		}
		if got := tab.maxStoreTS(cut); got != m {
			t.Fatalf("maxStoreTS(%d) = %d, want %d", cut, got, m)
		}
	}
	// Backwards first, so that every block is loaded again after eviction.
	for i := n - 1; i >= 0; i-- {
		got := tab.at(i)
		r := got
		if got.hashOff = 0; got != want[i] {
			t.Fatalf("at(%d) = %+v, want %+v", i, got, want[i])
		}
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
	// The cursor: the index walk's lookups (each record once or twice in
	// order, across blocks and files), with jumps back and ahead, offsets
	// inside records and past the cut, as a damaged index file has them.
	byPhy := map[int64]int{}
	for i, r := range want[:cut] {
		byPhy[r.phy] = i
	}
	var c recCursor
	rng := rand.New(rand.NewPCG(4, 5))
	lookup := func(p int64) int {
		if i, ok := byPhy[p]; ok {
			return i
		}
		return -1
	}
	for i, k := 0, 0; i < n && k < 4*n; k++ {
		p := want[i].phy
		switch x := rng.IntN(100); {
		case x < 2:
			p = want[rng.IntN(n)].phy // anywhere
		case x < 3:
			p++ // inside a record
		case x < 40:
			i++ // the next record after this one
		default:
			i += 0 // this record again (another key), then the next
			if x > 80 {
				i++
			}
		}
		i = min(i, n-1)
		gi, got := c.find(tab, p, cut, lookup)
		wi := lookup(p)
		if gi != wi {
			t.Fatalf("cursor find(%d) = %d, want %d", p, gi, wi)
		}
		if gi >= 0 {
			r := *got
			if r.hashOff = 0; r != want[gi] {
				t.Fatalf("cursor find(%d) = %+v, want %+v", p, r, want[gi])
			}
			for j, h := range hashes[gi] {
				if !tab.hasHash(got, h) {
					t.Fatalf("hasHash(%d, hash %d) = false", gi, j)
				}
			}
			if tab.hasHash(got, -1) {
				t.Fatalf("hasHash(%d, -1) = true", gi)
			}
		}
		if i == n-1 && k%7 == 0 {
			break
		}
	}
	if tab.err != nil {
		t.Fatal(tab.err)
	}
}

// indexOf is the table index of record i of file f.
func indexOf(sizes []int, f, i int) int {
	for _, s := range sizes[:f] {
		i += s
	}
	return i
}
