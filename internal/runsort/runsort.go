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
	"errors"
	"math"
	"os"
	"slices"
	"sort"
	"sync"

	"golang.org/x/sys/unix"

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
// records keep the order they were added in, when they are added by Add).
//
// Every run goes to one temp file, each after the other, which is made at
// the first run: an UnlinkedTemp per run cost a create, a journal entry
// and an unlink a run (66 for a 1 GiB store of small messages), most of a
// spill's time when the file system was busy with other writers.
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
	Key func(*T) uint64
	// Cuts, with Key, split the order into len(Cuts)+1 parts by key, for
	// IterParts: part 0 holds the records whose Key is below Cuts[0], part
	// p those from Cuts[p-1] up to below Cuts[p], the last the rest. They
	// must ascend and be set before the first record is added. Each run
	// notes where its parts start.
	Cuts []uint64

	buf []T // Add's records not yet written
	n   int // records added
	// mu guards what follows: AddRun and AddN may run on several
	// goroutines at once.
	mu    sync.Mutex
	f     *os.File // the runs, one after another
	end   int64    // f's length
	runs  []run
	spare [][]T // AddN's partly filled runs, taken by the next AddN
	err   error
}

// run is a sorted run in the sorter's file.
type run struct {
	off   int64 // where its first record is
	n     int
	parts []int // with Cuts: the index of each part's first record
}

func (s *Sorter[T]) runLen() int {
	if s.RunLen > 0 {
		return s.RunLen
	}
	return DefaultRunLen
}

func (s *Sorter[T]) fanIn() int {
	if s.FanIn >= 2 {
		return s.FanIn
	}
	return DefaultFanIn
}

// Add appends t. It must not be called while an AddRun or AddN runs.
func (s *Sorter[T]) Add(t T) error {
	if s.err != nil {
		return s.err
	}
	s.buf = append(s.buf, t)
	s.n++
	if len(s.buf) >= s.runLen() {
		if err := s.writeRun(s.buf); err != nil {
			return err
		}
		s.buf = s.buf[:0]
	}
	return nil
}

// AddRun adds the records of rs: it sorts rs in place and writes it as
// runs of at most RunLen records (rs may be reused once it returns). It
// is safe for concurrent use with other AddRun and AddN calls, whose
// records equal under Compare then come in any order.
func (s *Sorter[T]) AddRun(rs []T) error {
	s.mu.Lock()
	err := s.err
	s.n += len(rs)
	s.mu.Unlock()
	if err != nil {
		return err
	}
	for n := s.runLen(); len(rs) > 0; {
		k := min(n, len(rs))
		if err := s.writeRun(rs[:k]); err != nil {
			return err
		}
		rs = rs[k:]
	}
	return nil
}

// AddN adds the n records at(0), ..., at(n-1) to a run buffer of its own
// (one a partly filled run a previous AddN left, else a new one), which
// it sorts and writes each time it holds RunLen records, without holding
// a lock meanwhile. It is safe for concurrent use with other AddRun and
// AddN calls (records equal under Compare then come in any order): the
// records in memory are at most a run per goroutine adding at once.
func (s *Sorter[T]) AddN(n int, at func(i int) T) error {
	s.mu.Lock()
	if s.err != nil {
		defer s.mu.Unlock()
		return s.err
	}
	var b []T
	if k := len(s.spare); k > 0 {
		b, s.spare = s.spare[k-1], s.spare[:k-1]
	}
	s.n += n
	s.mu.Unlock()
	size := s.runLen()
	var err error
	for i := range n {
		if b == nil {
			b = make([]T, 0, size)
		}
		b = append(b, at(i))
		if len(b) >= size {
			if err = s.writeRun(b); err != nil {
				break
			}
			b = b[:0]
		}
	}
	if b != nil {
		s.mu.Lock()
		s.spare = append(s.spare, b)
		s.mu.Unlock()
	}
	return err
}

func (s *Sorter[T]) sortRun(b []T) {
	if s.Sort != nil {
		s.Sort(b)
		return
	}
	slices.SortStableFunc(b, s.Compare)
}

// Len is the number of records added.
func (s *Sorter[T]) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n
}

// Runs is the number of runs written so far (for tests).
func (s *Sorter[T]) Runs() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.runs)
}

// partsOf says where each part (Cuts) of the sorted b starts.
func (s *Sorter[T]) partsOf(b []T) []int {
	if len(s.Cuts) == 0 {
		return nil
	}
	parts := make([]int, len(s.Cuts)+1)
	for p, c := range s.Cuts {
		parts[p+1] = parts[p] + sort.Search(len(b)-parts[p], func(i int) bool { return s.Key(&b[parts[p]+i]) >= c })
	}
	return parts
}

// reserve makes room for size bytes at the end of the file (made at the
// first call).
func (s *Sorter[T]) reserve(size int64) (*os.File, int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return nil, 0, s.err
	}
	if s.f == nil {
		f, err := scan.UnlinkedTemp("storectl-sort-*")
		if err != nil {
			s.err = err
			return nil, 0, err
		}
		s.f = f
	}
	off := s.end
	s.end += size
	return s.f, off, nil
}

// fail keeps the first error.
func (s *Sorter[T]) fail(err error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err == nil {
		s.err = err
	}
	return s.err
}

// writeRun sorts b and writes it as a run (safe for concurrent use).
func (s *Sorter[T]) writeRun(b []T) error {
	if len(b) == 0 {
		return nil
	}
	s.sortRun(b)
	r := run{n: len(b), parts: s.partsOf(b)}
	f, off, err := s.reserve(int64(len(b)) * int64(s.Codec.Size))
	if err != nil {
		return err
	}
	r.off = off
	w := runWriter[T]{f: f, off: off, codec: s.Codec}
	for i := range b {
		w.add(b[i])
	}
	if err := w.flush(); err != nil {
		return s.fail(err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.runs = append(s.runs, r)
	return nil
}

// runWriter encodes records into a buffer and writes it at off onwards.
type runWriter[T any] struct {
	f     *os.File
	off   int64
	codec Codec[T]
	enc   []byte
	err   error
}

func (w *runWriter[T]) add(t T) {
	if w.enc == nil {
		w.enc = make([]byte, 0, readBuf)
	}
	w.enc = w.codec.Append(w.enc, t)
	if len(w.enc)+w.codec.Size > cap(w.enc) {
		w.flush()
	}
}

func (w *runWriter[T]) flush() error {
	if w.err == nil && len(w.enc) > 0 {
		_, w.err = w.f.WriteAt(w.enc, w.off)
		w.off += int64(len(w.enc))
	}
	w.enc = w.enc[:0]
	return w.err
}

// finish sorts the records still in memory (Add's, and AddN's partly
// filled runs) and merges runs FanIn at a time until the runs and those
// records are few enough to merge at once. It returns the records in
// memory, non-empty sorted slices, in the order they go after the runs.
func (s *Sorter[T]) finish() ([][]T, error) {
	if s.err != nil {
		return nil, s.err
	}
	var mems [][]T
	for _, b := range append([][]T{s.buf}, s.spare...) {
		if len(b) > 0 {
			s.sortRun(b)
			mems = append(mems, b)
		}
	}
	for fan := s.fanIn(); len(s.runs)+len(mems) > fan; {
		if len(s.runs) < 2 { // too many in memory (tests' tiny fan-ins)
			if err := s.writeRun(mems[0]); err != nil {
				return nil, err
			}
			mems = mems[1:]
			continue
		}
		if err := s.mergePass(min(fan, len(s.runs))); err != nil {
			return nil, err
		}
	}
	return mems, nil
}

// Iter returns the records in order. The records still in memory are
// merged with the runs without being written when there are few enough
// runs; otherwise runs are merged FanIn at a time into longer runs first.
// Add must not be called afterwards.
func (s *Sorter[T]) Iter() (*Iter[T], error) {
	mems, err := s.finish()
	if err != nil {
		return nil, err
	}
	it := s.newIter(len(s.runs) + len(mems))
	for _, r := range s.runs {
		it.src = append(it.src, source[T]{f: s.f, off: r.off, left: r.n})
	}
	// The records in memory come after every run: they were added last.
	for _, m := range mems {
		it.src = append(it.src, source[T]{mem: m, left: len(m)})
	}
	if err := it.build(); err != nil {
		return nil, err
	}
	return it, nil
}

// IterParts returns one iterator for each part of the order (Cuts), which
// may be used on different goroutines at once; their read-ahead together
// is what Iter's would be. Add must not be called afterwards.
func (s *Sorter[T]) IterParts() ([]*Iter[T], error) {
	mems, err := s.finish()
	if err != nil {
		return nil, err
	}
	np := len(s.Cuts) + 1
	memParts := make([][]int, len(mems))
	for i, m := range mems {
		memParts[i] = s.partsOf(m)
	}
	span := func(parts []int, n, p int) (lo, hi int) {
		if parts == nil { // no Cuts: one part
			return 0, n
		}
		lo, hi = parts[p], n
		if p+1 < len(parts) {
			hi = parts[p+1]
		}
		return lo, hi
	}
	its := make([]*Iter[T], np)
	for p := range its {
		it := s.newIter((len(s.runs) + len(mems)) * np)
		for _, r := range s.runs {
			if len(s.Cuts) > 0 && len(r.parts) != len(s.Cuts)+1 {
				return nil, errors.New("runsort: Cuts set after records were added")
			}
			lo, hi := span(r.parts, r.n, p)
			if hi > lo {
				it.src = append(it.src, source[T]{f: s.f, off: r.off + int64(lo)*int64(s.Codec.Size), left: hi - lo})
			}
		}
		for i, m := range mems {
			if lo, hi := span(memParts[i], len(m), p); hi > lo {
				it.src = append(it.src, source[T]{mem: m[lo:hi], left: hi - lo})
			}
		}
		if err := it.build(); err != nil {
			return nil, err
		}
		its[p] = it
	}
	return its, nil
}

// newIter is an iterator over k sources (read-ahead shared as readLen
// says), to which the caller adds them.
func (s *Sorter[T]) newIter(k int) *Iter[T] {
	return &Iter[T]{cmp: s.Compare, key: s.Key, size: s.Codec.Size, decode: s.Codec.Decode, bufLen: readLen(k)}
}

// mergePass merges the first k runs into one, written at the end of the
// file; their bytes are given back to the file system (a hole punched
// where the file system can).
func (s *Sorter[T]) mergePass(k int) error {
	merged := s.runs[:k]
	it := s.newIter(k)
	total := 0
	for _, r := range merged {
		it.src = append(it.src, source[T]{f: s.f, off: r.off, left: r.n})
		total += r.n
	}
	if err := it.build(); err != nil {
		return err
	}
	f, off, err := s.reserve(int64(total) * int64(s.Codec.Size))
	if err != nil {
		return err
	}
	out := run{off: off, n: total}
	if len(s.Cuts) > 0 {
		out.parts = make([]int, len(s.Cuts)+1)
	}
	w := runWriter[T]{f: f, off: off, codec: s.Codec}
	n, p := 0, 0
	for it.Next() {
		t := it.Record()
		for ; p < len(s.Cuts) && s.Key(&t) >= s.Cuts[p]; p++ {
			out.parts[p+1] = n
		}
		w.add(t)
		n++
	}
	for ; p < len(s.Cuts); p++ {
		out.parts[p+1] = n
	}
	if err := errors.Join(it.Err(), w.flush()); err != nil {
		return s.fail(err)
	}
	for _, r := range merged {
		punchHole(f, r.off, int64(r.n)*int64(s.Codec.Size))
	}
	// The merged run replaces the first k; order among runs is kept (it
	// holds the earliest-added records), which keeps the sort stable.
	s.runs = append([]run{out}, s.runs[k:]...)
	return nil
}

// Close releases the temp file.
func (s *Sorter[T]) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var err error
	if s.f != nil {
		err = s.f.Close()
		s.f = nil
	}
	s.runs, s.buf, s.spare = nil, nil, nil
	return err
}

// punchHole gives the bytes [off, off+n) of f back to the file system,
// when it can (best effort: the bytes are never read again).
func punchHole(f *os.File, off, n int64) {
	if n <= 0 {
		return
	}
	if c, err := f.SyscallConn(); err == nil {
		c.Control(func(fd uintptr) {
			unix.Fallocate(int(fd), unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, off, n)
		})
	}
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
	// keys holds each source's Key(&head) (a done source's: the largest
	// key), side by side: the tree's matches read them from a few cache
	// lines instead of from each source.
	keys  []uint64
	cur   T
	err   error
	init  bool
	total int // records from all sources
}

// Len is the number of records it yields in all.
func (it *Iter[T]) Len() int { return it.total }

// source is a sorted run (or part of one) in the sorter's file, read at
// off onwards, or records still in memory. Its head is the record it
// offers; done once it has none left. Ties go to the source added first
// (its index), which keeps the sort stable.
type source[T any] struct {
	f    *os.File
	off  int64
	mem  []T
	left int
	buf  []byte // read ahead from f
	pos  int
	head T
	done bool
}

// advance moves source i to its next record.
func (it *Iter[T]) advance(i int) error {
	s := &it.src[i]
	if s.left == 0 {
		s.done = true
		if it.key != nil {
			it.keys[i] = math.MaxUint64
		}
		return nil
	}
	s.left--
	if s.f == nil {
		s.head, s.mem = s.mem[0], s.mem[1:]
		if it.key != nil {
			it.keys[i] = it.key(&s.head)
		}
		return nil
	}
	if s.pos+it.size > len(s.buf) {
		n := min((s.left+1)*it.size, max(it.bufLen/it.size, 1)*it.size)
		if cap(s.buf) < n {
			s.buf = make([]byte, n)
		}
		s.buf = s.buf[:n]
		if _, err := s.f.ReadAt(s.buf, s.off); err != nil {
			return err
		}
		s.off += int64(n)
		s.pos = 0
	}
	s.head = it.decode(s.buf[s.pos : s.pos+it.size])
	s.pos += it.size
	if it.key != nil {
		it.keys[i] = it.key(&s.head)
	}
	return nil
}

// less says whether source a's head goes before source b's. Different
// keys decide (a done source's is the largest, so a live one goes first);
// equal ones may be a done source's and a head's with the largest key.
func (it *Iter[T]) less(a, b int) bool {
	if it.key != nil {
		if ka, kb := it.keys[a], it.keys[b]; ka != kb {
			return ka < kb
		}
	}
	sa, sb := &it.src[a], &it.src[b]
	if sa.done {
		return false
	}
	if sb.done {
		return true
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
		it.total += it.src[i].left
	}
	if k == 0 {
		return nil // Next says there is nothing
	}
	if it.key != nil {
		it.keys = make([]uint64, k)
	}
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
