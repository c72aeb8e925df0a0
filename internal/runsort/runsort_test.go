package runsort

import (
	"cmp"
	"encoding/binary"
	"math/rand/v2"
	"os"
	"slices"
	"testing"

	"github.com/storectl/storectl/internal/testutil"
)

type rec struct {
	key, seq uint32
}

var codec = Codec[rec]{Size: 8,
	Append: func(dst []byte, r rec) []byte {
		return binary.LittleEndian.AppendUint32(binary.LittleEndian.AppendUint32(dst, r.key), r.seq)
	},
	Decode: func(b []byte) rec { return rec{binary.LittleEndian.Uint32(b), binary.LittleEndian.Uint32(b[4:])} },
}

// TestSorterMatchesInMemory: with runs of every size (one record, a few,
// more than fit one merge pass) the merged stream is the stable in-memory
// sort of the same records (a fan-in past DefaultFanIn: one merge of
// hundreds or thousands of runs with smaller read buffers).
func TestSorterMatchesInMemory(t *testing.T) {
	for _, c := range []struct{ n, runLen, fanIn int }{
		{0, 4, 2}, {1, 4, 2}, {10, 3, 2}, {1000, 7, 3}, {5000, 50, 4}, {5000, 1 << 20, 64}, {20000, 100, 64}, {30000, 100, 512}, {3000, 1, 4096},
	} {
		rng := rand.New(rand.NewPCG(uint64(c.n), 9))
		in := make([]rec, c.n)
		for i := range in {
			in[i] = rec{key: uint32(rng.IntN(97)), seq: uint32(i)} // many equal keys: stability shows
		}
		s := &Sorter[rec]{Compare: func(a, b rec) int { return cmp.Compare(a.key, b.key) }, Codec: codec, RunLen: c.runLen, FanIn: c.fanIn}
		for _, r := range in {
			if err := s.Add(r); err != nil {
				t.Fatal(err)
			}
		}
		spilled := s.Runs()
		it, err := s.Iter()
		if err != nil {
			t.Fatal(err)
		}
		if spilled+1 <= c.fanIn && s.Runs() != spilled {
			t.Fatalf("n=%d run=%d fan-in=%d: %d runs merged into %d before the last merge", c.n, c.runLen, c.fanIn, spilled, s.Runs())
		}
		got := drain(t, it)
		want := slices.Clone(in)
		slices.SortStableFunc(want, s.Compare)
		if !slices.Equal(got, want) {
			t.Fatalf("n=%d run=%d fan-in=%d: merged stream differs from the in-memory sort", c.n, c.runLen, c.fanIn)
		}
		if c.n > c.runLen && s.Runs() == 0 {
			t.Fatalf("n=%d run=%d: nothing spilled", c.n, c.runLen)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestSorterLeavesNoFiles: the runs never show in the temp dir (they are
// unlinked at once) and no descriptor of them is left after Close.
func TestSorterLeavesNoFiles(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("TMPDIR", dir)
	s := &Sorter[rec]{Compare: func(a, b rec) int { return cmp.Compare(a.key, b.key) }, Codec: codec, RunLen: 10, FanIn: 3}
	for i := range 1000 {
		if err := s.Add(rec{uint32(i % 13), uint32(i)}); err != nil {
			t.Fatal(err)
		}
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Fatalf("temp dir holds %d entries while sorting", len(ents))
	}
	if testutil.OpenFiles(t, "storectl-sort-") == 0 {
		t.Fatal("no run is open while sorting: the check below proves nothing")
	}
	it, err := s.Iter()
	if err != nil {
		t.Fatal(err)
	}
	for it.Next() {
	}
	s.Close()
	if n := testutil.OpenFiles(t, "storectl-sort-"); n != 0 {
		t.Fatalf("%d run files still open after Close", n)
	}
}

// TestSorterKeyMatchesCompare: with a Key (here a coarse prefix of the
// order, so that many records tie on it and go to Compare) the merged
// stream is the same stable sort as without one, through merge passes
// and the records still in memory, and the merge calls Compare only for
// records whose keys are equal.
func TestSorterKeyMatchesCompare(t *testing.T) {
	for _, c := range []struct{ n, runLen, fanIn int }{
		{0, 4, 2}, {1, 4, 2}, {1000, 7, 3}, {5000, 50, 4}, {20000, 100, 64}, {30000, 100, 512},
	} {
		rng := rand.New(rand.NewPCG(uint64(c.n), 11))
		in := make([]rec, c.n)
		for i := range in {
			in[i] = rec{key: uint32(rng.IntN(1000)), seq: uint32(i)}
		}
		var calls, tied int
		byKey := func(a, b rec) int { return cmp.Compare(a.key, b.key) }
		s := &Sorter[rec]{Codec: codec, RunLen: c.runLen, FanIn: c.fanIn,
			Compare: func(a, b rec) int {
				calls++
				if a.key>>6 == b.key>>6 {
					tied++
				}
				return byKey(a, b)
			},
			Key: func(r *rec) uint64 { return uint64(r.key >> 6) },
			// The runs' own sorts do not count: only the merge's calls.
			Sort: func(rs []rec) { slices.SortStableFunc(rs, byKey) }}
		for _, r := range in {
			if err := s.Add(r); err != nil {
				t.Fatal(err)
			}
		}
		it, err := s.Iter()
		if err != nil {
			t.Fatal(err)
		}
		got := drain(t, it)
		want := slices.Clone(in)
		slices.SortStableFunc(want, byKey)
		if !slices.Equal(got, want) {
			t.Fatalf("n=%d run=%d fan-in=%d: merged stream with a Key differs from the in-memory sort", c.n, c.runLen, c.fanIn)
		}
		if calls != tied {
			t.Fatalf("n=%d: the merge called Compare %d times, %d of them for records with equal keys", c.n, calls, tied)
		}
		s.Close()
	}
}

// drain returns every record it yields, failing the test on its error.
func drain(t *testing.T, it *Iter[rec]) []rec {
	t.Helper()
	var got []rec
	for it.Next() {
		got = append(got, it.Record())
	}
	if err := it.Err(); err != nil {
		t.Fatal(err)
	}
	return got
}
