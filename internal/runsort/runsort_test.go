package runsort

import (
	"cmp"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/storectl/storectl/internal/testutil"
	"github.com/storectl/storectl/pkg/scan"
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

// TestSorterLeavesNoFiles: the runs never show in the temp dir (their
// one file is unlinked at once), all of them are in that one file, and no
// descriptor of it is left after Close.
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
	if n := testutil.OpenFiles(t, "storectl-sort-"); n != 1 {
		t.Fatalf("%d temp files open while sorting, want the one that holds every run", n)
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
		got := addAndMerge(t, s, in)
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
// addAndMerge adds in to s one record at a time and returns s's merged
// stream.
func addAndMerge(t *testing.T, s *Sorter[rec], in []rec) []rec {
	t.Helper()
	for _, r := range in {
		if err := s.Add(r); err != nil {
			t.Fatal(err)
		}
	}
	it, err := s.Iter()
	if err != nil {
		t.Fatal(err)
	}
	return drain(t, it)
}

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

// byKeySeq orders recs totally: concurrent adds give equal records in any
// order, so the tests of AddRun and AddN compare with a total order.
func byKeySeq(a, b rec) int {
	if c := cmp.Compare(a.key, b.key); c != 0 {
		return c
	}
	return cmp.Compare(a.seq, b.seq)
}

// addConcurrently adds in to s from workers goroutines at once, in
// batches of batch records, by AddN (even batches) and AddRun (odd
// ones, on a copy: AddRun sorts it in place).
func addConcurrently(t *testing.T, s *Sorter[rec], in []rec, workers, batch int) {
	t.Helper()
	next := make(chan int)
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for lo := range next {
				b := in[lo:min(lo+batch, len(in))]
				var err error
				if lo/batch%2 == 0 {
					err = s.AddN(len(b), func(i int) rec { return b[i] })
				} else {
					err = s.AddRun(slices.Clone(b))
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	for lo := 0; lo < len(in); lo += batch {
		next <- lo
	}
	close(next)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// TestSorterConcurrentAdds: records added by AddN and AddRun from several
// goroutines at once (runs written while others fill, partly filled runs
// left in memory, merge passes at small fan-ins, a run longer than RunLen
// given to AddRun) come out as the in-memory sort of them all.
func TestSorterConcurrentAdds(t *testing.T) {
	for _, c := range []struct{ n, runLen, fanIn, workers, batch int }{
		{0, 4, 2, 3, 5}, {1, 4, 2, 3, 5}, {100, 7, 2, 4, 3}, {5000, 50, 4, 3, 37}, {20000, 100, 64, 4, 1000}, {20000, 1000, 512, 2, 250},
	} {
		rng := rand.New(rand.NewPCG(uint64(c.n), 13))
		in := make([]rec, c.n)
		for i := range in {
			in[i] = rec{key: uint32(rng.IntN(97)), seq: uint32(i)}
		}
		s := &Sorter[rec]{Compare: byKeySeq, Codec: codec, RunLen: c.runLen, FanIn: c.fanIn}
		addConcurrently(t, s, in, c.workers, c.batch)
		if s.Len() != c.n {
			t.Fatalf("n=%d: Len %d", c.n, s.Len())
		}
		it, err := s.Iter()
		if err != nil {
			t.Fatal(err)
		}
		got := drain(t, it)
		want := slices.Clone(in)
		slices.SortFunc(want, byKeySeq)
		if !slices.Equal(got, want) {
			t.Fatalf("n=%d run=%d fan-in=%d: concurrently added records merge to %d records unlike the in-memory sort", c.n, c.runLen, c.fanIn, len(got))
		}
		s.Close()
	}
}

// TestSorterParts: with Cuts, IterParts's iterators, drained on their own
// goroutines at once, give the records of their key range each, in
// order, and together the whole sort; through merge passes, records
// still in memory (Add's and AddN's), empty parts (cuts below and above
// every key, two equal cuts) and Add as well as concurrent adds.
func TestSorterParts(t *testing.T) {
	for _, c := range []struct {
		n, runLen, fanIn int
		cuts             []uint64
		concurrent       bool
	}{
		{0, 4, 2, []uint64{10}, false},
		{1, 4, 2, []uint64{10}, true},
		{1000, 7, 3, []uint64{32, 64}, false},
		{5000, 50, 4, []uint64{0, 48, 48, 200}, true},
		{20000, 100, 64, []uint64{48}, true},
		{20000, 100, 512, []uint64{20, 40, 60, 80}, false},
	} {
		rng := rand.New(rand.NewPCG(uint64(c.n), 17))
		in := make([]rec, c.n)
		for i := range in {
			in[i] = rec{key: uint32(rng.IntN(97)), seq: uint32(i)}
		}
		s := &Sorter[rec]{Compare: byKeySeq, Codec: codec, RunLen: c.runLen, FanIn: c.fanIn,
			Key: func(r *rec) uint64 { return uint64(r.key) }, Cuts: c.cuts}
		if c.concurrent {
			addConcurrently(t, s, in, 3, 41)
		} else {
			for _, r := range in {
				if err := s.Add(r); err != nil {
					t.Fatal(err)
				}
			}
		}
		its, err := s.IterParts()
		if err != nil {
			t.Fatal(err)
		}
		if len(its) != len(c.cuts)+1 {
			t.Fatalf("%d iterators for %d cuts", len(its), len(c.cuts))
		}
		parts := make([][]rec, len(its))
		var wg sync.WaitGroup
		for p, it := range its {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for it.Next() {
					parts[p] = append(parts[p], it.Record())
				}
			}()
		}
		wg.Wait()
		var got []rec
		for p, part := range parts {
			if err := its[p].Err(); err != nil {
				t.Fatal(err)
			}
			for _, r := range part {
				if (p > 0 && uint64(r.key) < c.cuts[p-1]) || (p < len(c.cuts) && uint64(r.key) >= c.cuts[p]) {
					t.Fatalf("n=%d cuts=%v: key %d in part %d", c.n, c.cuts, r.key, p)
				}
			}
			got = append(got, part...)
		}
		want := slices.Clone(in)
		slices.SortFunc(want, byKeySeq)
		if !slices.Equal(got, want) {
			t.Fatalf("n=%d run=%d fan-in=%d cuts=%v: the parts make %d records unlike the in-memory sort", c.n, c.runLen, c.fanIn, c.cuts, len(got))
		}
		s.Close()
	}
}

// TestSorterWriteError: a sorter whose temp dir cannot be written says so
// from the add that spills, the adds after it and Iter, and leaves no
// file.
func TestSorterWriteError(t *testing.T) {
	tmp := t.TempDir()
	scan.SetTempDir(filepath.Join(tmp, "absent"))
	defer scan.SetTempDir("")
	s := &Sorter[rec]{Compare: byKeySeq, Codec: codec, RunLen: 4}
	in := make([]rec, 10)
	if err := s.AddN(len(in), func(i int) rec { return in[i] }); err == nil {
		t.Fatal("AddN spilled to an absent dir without an error")
	}
	if err := s.AddRun(in); err == nil {
		t.Fatal("AddRun after a failed spill: no error")
	}
	if _, err := s.Iter(); err == nil {
		t.Fatal("Iter after a failed spill: no error")
	}
	s.Close()
	if n := testutil.OpenFiles(t, "storectl-sort-"); n != 0 {
		t.Fatalf("%d run files open after Close", n)
	}
}

// TestSorterLargestKey: heads whose Key is the largest there is (what a
// done source's key reads as in the merge) still come out, in order,
// before and after sources run dry.
func TestSorterLargestKey(t *testing.T) {
	for _, c := range []struct{ n, runLen, fanIn int }{{10, 3, 4}, {1000, 7, 3}, {5000, 50, 512}} {
		rng := rand.New(rand.NewPCG(uint64(c.n), 19))
		in := make([]rec, c.n)
		for i := range in {
			in[i] = rec{key: uint32(rng.IntN(3)), seq: uint32(i)}
		}
		s := &Sorter[rec]{Compare: byKeySeq, Codec: codec, RunLen: c.runLen, FanIn: c.fanIn,
			Key: func(r *rec) uint64 { return math.MaxUint64 - 1 + uint64(min(r.key, 1)) }} // keys 1 and 2 share the largest
		got := addAndMerge(t, s, in)
		want := slices.Clone(in)
		slices.SortFunc(want, byKeySeq)
		if !slices.Equal(got, want) {
			t.Fatalf("n=%d: %d records merged unlike the in-memory sort", c.n, len(got))
		}
		s.Close()
	}
}
