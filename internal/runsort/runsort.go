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
// runs merged at once (64 read buffers of 64 KiB). A merge of more runs
// (a larger FanIn) shares readTotal among them, minReadBuf at least each:
// a merge pass writes and reads every record once more, which costs more
// than the smaller reads.
const (
	DefaultRunLen = 256 << 10
	DefaultFanIn  = 64
	readBuf       = 64 << 10
	readTotal     = DefaultFanIn * readBuf
	minReadBuf    = 4 << 10
)

// readLen is the read buffer of each of k merged sources.
func readLen(k int) int {
	return max(minReadBuf, min(readBuf, readTotal/max(k, 1)))
}

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
	Sort func([]T)
	// Key, when set, is a prefix of Compare's order the merge compares
	// first: Key(a) < Key(b) must mean Compare(a, b) < 0. Only records
	// with equal keys are handed to Compare (the first 8 bytes of a
	// random id settle nearly every comparison without the call).
	Key    func(*T) uint64
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
	it := &Iter[T]{cmp: s.Compare, key: s.Key, size: s.Codec.Size, decode: s.Codec.Decode, bufLen: readLen(len(s.runs) + 1)}
	for i, f := range s.runs {
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			return nil, err
		}
		it.src = append(it.src, source[T]{f: f, left: s.counts[i]})
	}
	// The records in memory come after every run: they were added last.
	it.src = append(it.src, source[T]{mem: s.buf, left: len(s.buf)})
	if err := it.build(); err != nil {
		return nil, err
	}
	return it, nil
}

// mergePass merges the first FanIn runs into one.
func (s *Sorter[T]) mergePass() error {
	k := min(s.FanIn, len(s.runs))
	sub := &Sorter[T]{Compare: s.Compare, Key: s.Key, Codec: s.Codec, FanIn: k + 1, runs: s.runs[:k], counts: s.counts[:k]}
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

// Iter merges sorted sources with a loser tree: each record taken costs
// one comparison per level of the tree (log2 of the sources), against
// about two a level for a binary heap, and no interface calls.
type Iter[T any] struct {
	cmp    func(a, b T) int
	key    func(*T) uint64 // Sorter.Key, or nil
	size   int
	bufLen int // bytes read ahead a source (readLen)
	decode func([]byte) T
	src    []source[T]
	// tree[0] is the source holding the smallest head; tree[t] for t in
	// 1..k-1 the loser of the match at node t, whose children are 2t and
	// 2t+1 (source i is leaf k+i).
	tree []int
	cur  T
	err  error
	init bool
}

// source is a sorted run in a file or the records still in memory. Its
// head is the record it offers; done once it has none left. Ties go to
// the source added first (its index), which keeps the sort stable.
type source[T any] struct {
	f    *os.File
	mem  []T
	left int
	buf  []byte // read ahead from f
	pos  int
	head T
	key  uint64 // Key(&head), when there is a Key
	done bool
}

// advance moves source i to its next record.
func (it *Iter[T]) advance(i int) error {
	s := &it.src[i]
	if s.left == 0 {
		s.done = true
		return nil
	}
	s.left--
	if s.f == nil {
		s.head, s.mem = s.mem[0], s.mem[1:]
		if it.key != nil {
			s.key = it.key(&s.head)
		}
		return nil
	}
	if s.pos+it.size > len(s.buf) {
		n := min((s.left+1)*it.size, max(it.bufLen/it.size, 1)*it.size)
		if cap(s.buf) < n {
			s.buf = make([]byte, n)
		}
		s.buf = s.buf[:n]
		if _, err := io.ReadFull(s.f, s.buf); err != nil {
			return err
		}
		s.pos = 0
	}
	s.head = it.decode(s.buf[s.pos : s.pos+it.size])
	s.pos += it.size
	if it.key != nil {
		s.key = it.key(&s.head)
	}
	return nil
}

// less says whether source a's head goes before source b's.
func (it *Iter[T]) less(a, b int) bool {
	sa, sb := &it.src[a], &it.src[b]
	if sa.done {
		return false
	}
	if sb.done {
		return true
	}
	if it.key != nil && sa.key != sb.key {
		return sa.key < sb.key
	}
	if c := it.cmp(sa.head, sb.head); c != 0 {
		return c < 0
	}
	return a < b
}

// build reads every source's first record and plays the tree's matches.
func (it *Iter[T]) build() error {
	k := len(it.src)
	for i := range it.src {
		if err := it.advance(i); err != nil {
			return err
		}
	}
	it.tree = make([]int, k)
	win := make([]int, 2*k)
	for i := range k {
		win[k+i] = i
	}
	for t := k - 1; t >= 1; t-- {
		a, b := win[2*t], win[2*t+1]
		if it.less(b, a) {
			a, b = b, a
		}
		win[t], it.tree[t] = a, b
	}
	it.tree[0] = win[1]
	if k == 1 {
		it.tree[0] = 0
	}
	return nil
}

// replay plays source s's new head up from its leaf.
func (it *Iter[T]) replay(s int) {
	k := len(it.src)
	for t := (s + k) / 2; t >= 1; t /= 2 {
		if it.less(it.tree[t], s) {
			it.tree[t], s = s, it.tree[t]
		}
	}
	it.tree[0] = s
}

// Next moves to the next record; false at the end or on a read error
// (Err).
func (it *Iter[T]) Next() bool {
	if it.err != nil || len(it.src) == 0 {
		return false
	}
	if !it.init {
		it.init = true
	} else {
		top := it.tree[0]
		if err := it.advance(top); err != nil {
			it.err = err
			return false
		}
		it.replay(top)
	}
	w := &it.src[it.tree[0]]
	if w.done {
		return false
	}
	it.cur = w.head
	return true
}

// Record is the current record.
func (it *Iter[T]) Record() T { return it.cur }

// Err is the first read error.
func (it *Iter[T]) Err() error { return it.err }
