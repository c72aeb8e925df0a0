// Package runsort sorts more fixed-size records than memory should hold,
// the way external sorts do: records are collected into a run of at most
// RunLen, each full run is sorted and written to an unlinked temp file,
// and Iter merges the runs (in passes of at most FanIn runs when there
// are more) into one sorted stream. Memory is one run plus a read buffer
// per merged run, whatever the number of records.
//
// The temp files are unlinked as soon as they are created
// (scan.UnlinkedTemp: in the temp dir, never in a data dir), so they
// vanish with the process whatever happens; Close releases them earlier.
package runsort

import (
	"bufio"
	"container/heap"
	"errors"
	"io"
	"os"
	"slices"

	"github.com/storectl/storectl/pkg/scan"
)

// Codec encodes and decodes one record in exactly Size bytes.
type Codec[T any] struct {
	Size   int
	Append func(dst []byte, t T) []byte
	Decode func(b []byte) T
}

// Defaults: a run of 256 Ki records (8 MiB of 32-byte records) and 64
// runs merged at once (64 read buffers of 64 KiB).
const (
	DefaultRunLen = 256 << 10
	DefaultFanIn  = 64
	readBuf       = 64 << 10
)

// Sorter collects records and sorts them by Compare (a stable sort: equal
// records keep the order they were added in).
type Sorter[T any] struct {
	Compare func(a, b T) int
	Codec   Codec[T]
	RunLen  int // records per run; DefaultRunLen when 0 (tests set it small to force many runs)
	FanIn   int // runs merged at once; DefaultFanIn when 0
	// Sort, when set, sorts a run in place instead of a stable sort by
	// Compare; it must give the order Compare does (records equal under
	// Compare may then come in any order: only for keys that differ).
	Sort   func([]T)
	buf    []T
	runs   []*os.File // sorted runs, each holding n records from offset 0
	counts []int
	n      int
	enc    []byte
	err    error
}

// Add appends t.
func (s *Sorter[T]) Add(t T) error {
	if s.err != nil {
		return s.err
	}
	if s.RunLen <= 0 {
		s.RunLen = DefaultRunLen
	}
	s.buf = append(s.buf, t)
	s.n++
	if len(s.buf) >= s.RunLen {
		s.err = s.spill()
	}
	return s.err
}

func (s *Sorter[T]) sortRun() {
	if s.Sort != nil {
		s.Sort(s.buf)
		return
	}
	slices.SortStableFunc(s.buf, s.Compare)
}

// Len is the number of records added.
func (s *Sorter[T]) Len() int { return s.n }

// Runs is the number of runs spilled so far (for tests).
func (s *Sorter[T]) Runs() int { return len(s.runs) }

// spill sorts the collected records and writes them as a run.
func (s *Sorter[T]) spill() error {
	if len(s.buf) == 0 {
		return nil
	}
	s.sortRun()
	f, err := scan.UnlinkedTemp("storectl-sort-*")
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(f, readBuf)
	for _, t := range s.buf {
		s.enc = s.Codec.Append(s.enc[:0], t)
		if _, err := w.Write(s.enc); err != nil {
			f.Close()
			return err
		}
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	s.runs = append(s.runs, f)
	s.counts = append(s.counts, len(s.buf))
	s.buf = s.buf[:0]
	return nil
}

// Iter returns the records in order. The records still in memory are
// merged with the runs without being written when there are few enough
// runs; otherwise runs are merged FanIn at a time into longer runs first.
// Add must not be called afterwards.
func (s *Sorter[T]) Iter() (*Iter[T], error) {
	if s.err != nil {
		return nil, s.err
	}
	if s.FanIn < 2 {
		s.FanIn = DefaultFanIn
	}
	s.sortRun()
	for len(s.runs)+1 > s.FanIn {
		if err := s.mergePass(); err != nil {
			return nil, err
		}
	}
	it := &Iter[T]{cmp: s.Compare}
	for i, f := range s.runs {
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			return nil, err
		}
		src := &source[T]{r: bufio.NewReaderSize(f, readBuf), left: s.counts[i], codec: s.Codec, order: i}
		src.b = make([]byte, s.Codec.Size)
		if err := it.push(src); err != nil {
			return nil, err
		}
	}
	// The records in memory come after every run: they were added last.
	mem := &source[T]{mem: s.buf, left: len(s.buf), order: len(s.runs)}
	if err := it.push(mem); err != nil {
		return nil, err
	}
	return it, nil
}

// mergePass merges the first FanIn runs into one.
func (s *Sorter[T]) mergePass() error {
	k := min(s.FanIn, len(s.runs))
	sub := &Sorter[T]{Compare: s.Compare, Codec: s.Codec, FanIn: k + 1, runs: s.runs[:k], counts: s.counts[:k]}
	it, err := sub.Iter()
	if err != nil {
		return err
	}
	f, err := scan.UnlinkedTemp("storectl-sort-*")
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(f, readBuf)
	n := 0
	for it.Next() {
		s.enc = s.Codec.Append(s.enc[:0], it.Record())
		if _, err := w.Write(s.enc); err != nil {
			f.Close()
			return err
		}
		n++
	}
	if err := it.Err(); err != nil {
		f.Close()
		return err
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	for _, r := range s.runs[:k] {
		r.Close()
	}
	// The merged run replaces the first k; order among runs is kept (it
	// holds the earliest-added records), which keeps the sort stable.
	s.runs = append([]*os.File{f}, s.runs[k:]...)
	s.counts = append([]int{n}, s.counts[k:]...)
	return nil
}

// Close releases the temp files.
func (s *Sorter[T]) Close() error {
	var err error
	for _, f := range s.runs {
		err = errors.Join(err, f.Close())
	}
	s.runs, s.counts, s.buf = nil, nil, nil
	return err
}

// Iter merges sorted sources.
type Iter[T any] struct {
	cmp  func(a, b T) int
	h    srcHeap[T]
	cur  T
	err  error
	init bool
}

type source[T any] struct {
	r     *bufio.Reader
	mem   []T
	left  int
	codec Codec[T]
	b     []byte
	head  T
	order int // earlier sources win ties: stability
}

func (s *source[T]) next() (bool, error) {
	if s.left == 0 {
		return false, nil
	}
	s.left--
	if s.r == nil {
		s.head, s.mem = s.mem[0], s.mem[1:]
		return true, nil
	}
	if _, err := io.ReadFull(s.r, s.b); err != nil {
		return false, err
	}
	s.head = s.codec.Decode(s.b)
	return true, nil
}

func (it *Iter[T]) push(s *source[T]) error {
	ok, err := s.next()
	if err != nil {
		return err
	}
	if ok {
		it.h.cmp = it.cmp
		it.h.s = append(it.h.s, s)
	}
	return nil
}

// Next moves to the next record; false at the end or on a read error
// (Err).
func (it *Iter[T]) Next() bool {
	if it.err != nil {
		return false
	}
	if !it.init {
		it.init = true
		it.h.cmp = it.cmp
		heap.Init(&it.h)
	} else if len(it.h.s) > 0 {
		top := it.h.s[0]
		ok, err := top.next()
		if err != nil {
			it.err = err
			return false
		}
		if ok {
			heap.Fix(&it.h, 0)
		} else {
			heap.Pop(&it.h)
		}
	}
	if len(it.h.s) == 0 {
		return false
	}
	it.cur = it.h.s[0].head
	return true
}

// Record is the current record.
func (it *Iter[T]) Record() T { return it.cur }

// Err is the first read error.
func (it *Iter[T]) Err() error { return it.err }

type srcHeap[T any] struct {
	s   []*source[T]
	cmp func(a, b T) int
}

func (h *srcHeap[T]) Len() int { return len(h.s) }
func (h *srcHeap[T]) Less(i, j int) bool {
	if c := h.cmp(h.s[i].head, h.s[j].head); c != 0 {
		return c < 0
	}
	return h.s[i].order < h.s[j].order
}
func (h *srcHeap[T]) Swap(i, j int) { h.s[i], h.s[j] = h.s[j], h.s[i] }
func (h *srcHeap[T]) Push(x any)    { h.s = append(h.s, x.(*source[T])) }
func (h *srcHeap[T]) Pop() any {
	x := h.s[len(h.s)-1]
	h.s = h.s[:len(h.s)-1]
	return x
}
