package dledger

import (
	"errors"
	"io"
	"os"
	"sort"

	"github.com/storectl/storectl/internal/storefile"
	fdl "github.com/storectl/storectl/pkg/format/dledger"
	rmq "github.com/storectl/storectl/pkg/format/rocketmq"
	"github.com/storectl/storectl/pkg/scan/cqueue"
)

// indexReader reads index units by entry index through a read-ahead
// buffer: the walk asks for them in order, one per entry.
type indexReader struct {
	files []dataFile
	buf   []byte
	at    int64 // index offset of buf[0], -1 when empty
	fh    *os.File
	fi    int
	errs  map[int]error // files that could not be opened or read, by position in files
}

// What unit knows of an entry's index unit.
const (
	unitNone   = iota // no index file covers it
	unitOK            // read
	unitUnread        // its index file could not be read: unknown
)

const indexChunk = 64 << 10

func newIndexReader(files []dataFile) *indexReader {
	return &indexReader{files: files, at: -1, fi: -1, buf: make([]byte, 0, indexChunk)}
}

// unit returns entry idx's index unit and what is known of it: unitNone
// when no index file covers it, unitUnread when the file that does could
// not be opened or read (a dir or FIFO in its place, permission, I/O).
func (r *indexReader) unit(idx int64) (fdl.IndexUnit, int) {
	at := idx * fdl.IndexUnitSize
	if idx < 0 {
		return fdl.IndexUnit{}, unitNone
	}
	if r.at < 0 || at < r.at || at+fdl.IndexUnitSize > r.at+int64(len(r.buf)) {
		i := sort.Search(len(r.files), func(i int) bool { return r.files[i].base > at }) - 1
		if i < 0 || at+fdl.IndexUnitSize > r.files[i].base+r.files[i].size {
			return fdl.IndexUnit{}, unitNone
		}
		if r.errs[i] != nil {
			return fdl.IndexUnit{}, unitUnread
		}
		if i != r.fi {
			if r.fh != nil {
				r.fh.Close()
			}
			fh, err := storefile.Open(r.files[i].path)
			if err != nil {
				r.fh, r.fi = nil, -1
				r.fail(i, err)
				return fdl.IndexUnit{}, unitUnread
			}
			r.fh, r.fi = fh, i
		}
		n := min(int64(indexChunk), r.files[i].base+r.files[i].size-at)
		r.buf = r.buf[:n]
		k, err := r.fh.ReadAt(r.buf, at-r.files[i].base)
		r.buf = r.buf[:k/fdl.IndexUnitSize*fdl.IndexUnitSize]
		r.at = at
		if len(r.buf) < fdl.IndexUnitSize {
			r.at = -1
			if err != nil && !errors.Is(err, io.EOF) {
				r.fail(i, err)
				return fdl.IndexUnit{}, unitUnread
			}
			return fdl.IndexUnit{}, unitNone
		}
	}
	u, _ := fdl.DecodeIndexUnit(r.buf[at-r.at:], at)
	return u, unitOK
}

func (r *indexReader) fail(i int, err error) {
	if r.errs == nil {
		r.errs = map[int]error{}
	}
	r.errs[i] = err
}

// report names every index file that could not be read (the entries whose
// units it holds are not judged against it) and makes the result
// incomplete.
func (r *indexReader) report(s *scanner) {
	for i, f := range r.files {
		err := r.errs[i]
		if err == nil && f.irregular != nil {
			err = f.irregular // no entry asked for its units: unread all the same
		}
		if err != nil {
			s.res.Unread(f.rel, err)
		}
	}
}

func (r *indexReader) close() {
	if r.fh != nil {
		r.fh.Close()
		r.fh = nil
	}
}

// cqCursor walks one consume queue's units in order with a buffer, so
// thousands of queues can be merged by physical offset with bounded memory
// and descriptors: the buffer is cursorBudget shared by the queues (at
// least 4 KiB, at most 32 KiB a queue: the merge takes a unit from each
// queue in turn, and 16 queues of 256 KiB buffers, 4 MiB, did not stay in
// the L2 cache between the refill's copy and the decode), and a queue keeps its file open
// between refills only while the merge has few queues (keepOpenQueues).
type cqCursor struct {
	q     *cqueue.Queue
	fi    int
	pos   int64 // position in the current file of the next unit to read
	buf   []byte
	bpos  int   // next unit in buf
	idx   int64 // queue offset of unit
	unit  rmq.CQUnit
	done  bool
	units int      // buffer size in units
	fh    *os.File // the current file, kept open (nil: opened per refill)
	keep  bool
	count *int64 // the queue's units taken so far (queue offset + 1 of the last)
	// stop is the base of the queue's first irregular file (-1 none);
	// unread is where the cursor stopped at a file it could not read.
	stop   int64
	unread *cqUnread
}

// cqUnread is a consume queue whose walk stopped at a file it could not
// read (a dir or FIFO in its place, permission, I/O): its units from
// From (a queue offset) on are unknown.
type cqUnread struct {
	Rel  string
	From int64
	Err  error
}

// cursorBudget is the consume queue read buffers' total size.
const cursorBudget = 4 << 20

// keepOpenQueues: up to this many queues, each keeps its file open.
const keepOpenQueues = 256

func newCursor(q *cqueue.Queue, nq int, count *int64) *cqCursor {
	units := min(max(cursorBudget/max(nq, 1)/rmq.CQUnitSize, 4<<10/rmq.CQUnitSize), 32<<10/rmq.CQUnitSize)
	c := &cqCursor{q: q, idx: q.MinIndex() - 1, units: units, keep: nq <= keepOpenQueues, count: count, stop: -1}
	if len(q.Irregular) > 0 {
		c.stop = q.Irregular[0].Base
	}
	return c
}

// unreadAt stops the cursor at a file it cannot read.
func (c *cqCursor) unreadAt(rel string, base int64, err error) {
	c.unread = &cqUnread{Rel: rel, From: base / rmq.CQUnitSize, Err: err}
	c.finish()
}

// atIrregular stops the cursor when the stream reaches the queue's
// irregular file (at base: the next file's place), true if it did.
func (c *cqCursor) atIrregular(base int64) bool {
	if c.stop < 0 || base < c.stop {
		return false
	}
	f := c.q.Irregular[0]
	c.unreadAt(f.Rel, f.Base, &storefile.NotRegularError{Path: f.Path, Mode: irregularMode(f.Path), Want: "regular file"})
	return true
}

func irregularMode(p string) os.FileMode {
	if st, err := os.Stat(p); err == nil {
		return st.Mode().Type()
	}
	return os.ModeIrregular
}

// next loads the next unit; false at the end of the queue's data (the
// first unit ConsumeQueue.recover stops at, or the files' end).
func (c *cqCursor) next() bool {
	for !c.done {
		if c.bpos+rmq.CQUnitSize <= len(c.buf) {
			u, _ := rmq.DecodeCQUnit(c.buf[c.bpos:], 0)
			c.bpos += rmq.CQUnitSize
			if !u.Valid() {
				c.finish()
				return false
			}
			c.unit, c.idx = u, c.idx+1
			return true
		}
		if c.fi >= len(c.q.Files) {
			end := int64(0)
			if n := len(c.q.Files); n > 0 {
				end = c.q.Files[n-1].Base + c.q.Files[n-1].Size
			}
			if !c.atIrregular(end) {
				c.finish()
			}
			return false
		}
		f := c.q.Files[c.fi]
		if c.pos == 0 && c.atIrregular(f.Base) {
			return false
		}
		if c.pos+rmq.CQUnitSize > f.Size {
			if c.fi+1 < len(c.q.Files) && c.q.Files[c.fi+1].Base != f.Base+f.Size {
				if !c.atIrregular(f.Base + f.Size) {
					c.finish() // a gap: the broker's checkSelf fails; stop
				}
				return false
			}
			c.closeFile()
			c.fi, c.pos = c.fi+1, 0
			continue
		}
		fh := c.fh
		if fh == nil {
			var err error
			if fh, err = storefile.Open(f.Path); err != nil {
				c.unreadAt(f.Rel, f.Base, err)
				return false
			}
		}
		n := min(int64(c.units*rmq.CQUnitSize), f.Size-c.pos) / rmq.CQUnitSize * rmq.CQUnitSize
		if cap(c.buf) < int(n) {
			c.buf = make([]byte, n)
		}
		c.buf = c.buf[:n]
		k, rerr := fh.ReadAt(c.buf, c.pos)
		if c.keep {
			c.fh = fh
		} else {
			fh.Close()
		}
		if k < len(c.buf) && rerr != nil && !errors.Is(rerr, io.EOF) {
			c.unreadAt(f.Rel, f.Base, rerr)
			return false
		}
		c.buf, c.bpos = c.buf[:k/rmq.CQUnitSize*rmq.CQUnitSize], 0
		c.pos += int64(len(c.buf))
		if len(c.buf) == 0 {
			c.finish()
		}
	}
	return false
}

// finish marks the cursor done and releases its file and buffer.
func (c *cqCursor) finish() {
	c.done, c.buf = true, nil
	c.closeFile()
}

func (c *cqCursor) closeFile() {
	if c.fh != nil {
		c.fh.Close()
		c.fh = nil
	}
}

// cqMerge yields the units of many queues in physical offset order: a
// binary min-heap of the cursors by (offset, queue offset), written out
// for its one element type (container/heap's interface calls were a
// third of the merge's cost, one sift per unit). Its sifts are
// container/heap's, so cursors that tie come out in the same order.
type cqMerge struct {
	h   []*cqCursor
	byQ map[*cqueue.Queue]*cqCursor // every cursor, done or not (for its unread)
}

// unreadOf is where q's walk stopped at a file it could not read (nil:
// it read them all).
func (m *cqMerge) unreadOf(q *cqueue.Queue) *cqUnread {
	if m == nil || m.byQ[q] == nil {
		return nil
	}
	return m.byQ[q].unread
}

func cqLess(a, b *cqCursor) bool {
	if a.unit.CommitLogOffset != b.unit.CommitLogOffset {
		return a.unit.CommitLogOffset < b.unit.CommitLogOffset
	}
	return a.idx < b.idx
}

// down is container/heap's down(h, i, len(h)).
func (m *cqMerge) down(i int) {
	h := m.h
	for {
		j := 2*i + 1
		if j >= len(h) {
			return
		}
		if r := j + 1; r < len(h) && cqLess(h[r], h[j]) {
			j = r
		}
		if !cqLess(h[j], h[i]) {
			return
		}
		h[i], h[j] = h[j], h[i]
		i = j
	}
}

func newCQMerge(qs []*cqueue.Queue, counts map[*cqueue.Queue]*int64) *cqMerge {
	m := &cqMerge{byQ: make(map[*cqueue.Queue]*cqCursor, len(qs))}
	for _, q := range qs {
		n := new(int64)
		counts[q] = n
		c := newCursor(q, len(qs), n)
		m.byQ[q] = c
		if c.next() {
			m.h = append(m.h, c)
		}
	}
	for i := len(m.h)/2 - 1; i >= 0; i-- {
		m.down(i)
	}
	return m
}

// peek is the cursor with the lowest offset, nil when all are done.
func (m *cqMerge) peek() *cqCursor {
	if len(m.h) == 0 {
		return nil
	}
	return m.h[0]
}

// advance moves the lowest cursor to its next unit.
func (m *cqMerge) advance() {
	c := m.h[0]
	*c.count = c.idx + 1
	if !c.next() {
		n := len(m.h) - 1
		m.h[0], m.h[n] = m.h[n], nil
		m.h = m.h[:n]
	}
	m.down(0)
}

// close closes the files the cursors still hold.
func (m *cqMerge) close() {
	for _, c := range m.h {
		c.closeFile()
	}
}
