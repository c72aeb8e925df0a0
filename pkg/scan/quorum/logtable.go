package quorum

import (
	"fmt"
	"sort"
	"sync"
	"unsafe"

	"github.com/storectl/storectl/pkg/scan"
)

// logTable maps a replica's Raft indexes to where their entries are
// (Replica.Log). An entry is 40 pointer-free bytes in pages of
// logPageSize consecutive indexes, the file named by its number in the
// table's file list: a map of *EntryLoc had cost about 150 bytes an entry
// (the EntryLoc, its two string headers, the map slot), a third of
// verify's memory on a generated 1 GiB store, and every one of them was
// a pointer the collector walked.
//
// The pages live in the scan's logPool: at most its budget of them are in
// memory (all tables of the scan together), the others in an unlinked temp
// file (scan.Spill: --tmp-dir, else $TMPDIR), so the table's memory does
// not grow with the log. A table reads and writes through its current
// page, which the pool never evicts; it takes the pool's lock only to
// move to another page. The walks that fill and read a table go through
// the indexes in order (the WAL per replica, each segment, the replay),
// so a page is loaded about once per walk.
type logTable struct {
	files []logFile
	byPth map[string]uint32
	pages map[uint64]*pageRef
	n     int
	pool  *logPool
	// cur is the pinned page, the one at curKey.
	cur    *pageRef
	curKey uint64
}

type logFile struct{ path, rel string }

const logPageBits = 10
const logPageSize = 1 << logPageBits

type logPage [logPageSize]packedLoc

// packedLoc is an EntryLoc without its index (the table's key) and with
// its file as a number. aux is RecSize for a WAL record, Slot for a
// segment entry (the other is zero in an EntryLoc).
type packedLoc struct {
	off, record int64
	term        uint64
	length, aux uint32
	file        uint32
	flags       uint8
}

const (
	locSet uint8 = 1 << iota
	locInWAL
	locOK
)

const logPageBytes = int(unsafe.Sizeof(logPage{}))

// pageRef is one page of a table: in memory (mem) or in the spill file at
// off (-1: never written there).
type pageRef struct {
	mem        *logPage
	off        int64
	dirty      bool // mem differs from the copy at off
	pinned     bool
	prev, next *pageRef // the pool's list of unpinned pages in memory
}

// DefaultLogPages is how many log-table pages (40 KiB each) a scan keeps
// in memory: 16 MiB whatever the store's size.
const DefaultLogPages = 400

// logPool holds the pages of a scan's log tables: at most budget in
// memory (more only while more are pinned), the least recently used
// unpinned one written to the spill file to make room.
type logPool struct {
	mu       sync.Mutex
	budget   int
	resident int
	// head is the most recently unpinned page, tail the eviction victim.
	head, tail *pageRef
	spill      *scan.Spill
	free       []*logPage
	err        error // the first failure reading a page back
	spilled    int   // page writes to the spill file (tests)
	loaded     int   // pages read back (tests)
}

func newLogPool(budget int, spill *scan.Spill) *logPool {
	if budget <= 0 {
		budget = DefaultLogPages
	}
	return &logPool{budget: budget, spill: spill}
}

func (p *logPool) unlink(r *pageRef) {
	if r.prev != nil {
		r.prev.next = r.next
	} else if p.head == r {
		p.head = r.next
	}
	if r.next != nil {
		r.next.prev = r.prev
	} else if p.tail == r {
		p.tail = r.prev
	}
	r.prev, r.next = nil, nil
}

func (p *logPool) pushFront(r *pageRef) {
	r.prev, r.next = nil, p.head
	if p.head != nil {
		p.head.prev = r
	}
	p.head = r
	if p.tail == nil {
		p.tail = r
	}
}

func pageBytes(pg *logPage) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(pg)), logPageBytes)
}

// newPage returns a zeroed page, evicting one when the budget is spent.
// Called with mu held.
func (p *logPool) newPage() *logPage {
	for p.resident >= p.budget && p.tail != nil && !p.spill.Broken() {
		v := p.tail
		if v.dirty || v.off < 0 {
			b := pageBytes(v.mem)
			var ok bool
			if v.off < 0 {
				v.off, ok = p.spill.Put(b)
			} else {
				ok = p.spill.WriteAt(b, v.off)
			}
			if !ok {
				v.off = -1
				break // the spill file cannot be used: keep pages in memory
			}
			p.spilled++
		}
		p.unlink(v)
		p.free = append(p.free, v.mem)
		v.mem, v.dirty = nil, false
		p.resident--
	}
	p.resident++
	if n := len(p.free); n > 0 {
		pg := p.free[n-1]
		p.free = p.free[:n-1]
		*pg = logPage{}
		return pg
	}
	return new(logPage)
}

// pin makes r the caller's page: in memory (read back when spilled) and
// not evicted until unpin.
func (p *logPool) pin(r *pageRef) {
	p.mu.Lock()
	defer p.mu.Unlock()
	r.pinned = true
	if r.mem != nil {
		p.unlink(r)
		return
	}
	r.mem = p.newPage()
	if r.off >= 0 {
		if err := p.spill.ReadAt(pageBytes(r.mem), r.off, "a quorum log page"); err != nil {
			*r.mem = logPage{}
			if p.err == nil {
				p.err = err
			}
		}
		p.loaded++
	}
}

func (p *logPool) unpin(r *pageRef) {
	p.mu.Lock()
	r.pinned = false
	p.pushFront(r)
	p.mu.Unlock()
}

// Err is the first failure reading a page back (its entries then read as
// missing).
func (p *logPool) Err() error {
	if p == nil {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

// newLogTable returns a table whose pages are in pool (nil: a pool of its
// own with the default budget and no spill file).
func newLogTable(pool *logPool) *logTable {
	if pool == nil {
		pool = newLogPool(0, &scan.Spill{})
	}
	return &logTable{byPth: map[string]uint32{}, pages: map[uint64]*pageRef{}, pool: pool}
}

// file returns the number of the file at path (rel: its name in output).
func (t *logTable) file(path, rel string) uint32 {
	if n, ok := t.byPth[path]; ok {
		return n
	}
	n := uint32(len(t.files))
	t.files = append(t.files, logFile{path, rel})
	t.byPth[path] = n
	return n
}

// Len is the number of indexes in the table.
func (t *logTable) Len() int {
	if t == nil {
		return 0
	}
	return t.n
}

// release unpins the current page, so the pool may evict it: the end of a
// walk over the table.
func (t *logTable) release() {
	if t == nil || t.cur == nil {
		return
	}
	t.pool.unpin(t.cur)
	t.cur = nil
}

// page returns the page holding key, pinned; nil when there is none and
// create is false.
func (t *logTable) page(key uint64, create bool) *logPage {
	if t.cur != nil && t.curKey == key {
		return t.cur.mem
	}
	r := t.pages[key]
	if r == nil {
		if !create {
			return nil
		}
		r = &pageRef{off: -1}
		t.pages[key] = r
	}
	t.release()
	t.pool.pin(r)
	t.cur, t.curKey = r, key
	return r.mem
}

// slot returns idx's slot; write marks its page changed.
func (t *logTable) slot(idx uint64, create, write bool) *packedLoc {
	p := t.page(idx>>logPageBits, create)
	if p == nil {
		return nil
	}
	if write {
		t.cur.dirty = true
	}
	return &p[idx&(logPageSize-1)]
}

// put sets idx to loc, in file number f (of t.file). With keepWAL, an
// index a WAL record already holds keeps it (a WAL entry wins over a
// segment entry of the same index).
func (t *logTable) put(f uint32, loc *EntryLoc, keepWAL bool) {
	s := t.slot(loc.Index, true, true)
	if s.flags&locSet != 0 {
		if keepWAL && s.flags&locInWAL != 0 {
			return
		}
	} else {
		t.n++
	}
	*s = packedLoc{off: loc.Offset, record: loc.Record, term: loc.Term, length: loc.Length, file: f, flags: locSet}
	if loc.InWAL {
		s.flags |= locInWAL
		s.aux = uint32(loc.RecSize)
	} else {
		s.aux = uint32(loc.Slot)
	}
	if loc.OK {
		s.flags |= locOK
	}
}

// Get returns the entry at idx, nil when the table has none. The
// EntryLoc is the caller's (a new one each call).
func (t *logTable) Get(idx uint64) *EntryLoc {
	l := new(EntryLoc)
	if !t.load(idx, l) {
		return nil
	}
	return l
}

// load sets *l to the entry at idx and reports whether there is one (a
// nil table has none).
func (t *logTable) load(idx uint64, l *EntryLoc) bool {
	if t == nil {
		return false
	}
	s := t.slot(idx, false, false)
	if s == nil || s.flags&locSet == 0 {
		return false
	}
	f := t.files[s.file]
	*l = EntryLoc{Path: f.path, Rel: f.rel, Offset: s.off, Length: s.length, Record: s.record, Index: idx, Term: s.term,
		InWAL: s.flags&locInWAL != 0, OK: s.flags&locOK != 0}
	if l.InWAL {
		l.RecSize = int64(s.aux)
	} else {
		l.Slot = int(s.aux)
	}
	return true
}

// truncateAbove drops the indexes above idx (only the pages that hold
// such indexes are read).
func (t *logTable) truncateAbove(idx uint64) {
	for _, k := range t.keys() {
		if (k+1)<<logPageBits-1 <= idx {
			continue
		}
		p := t.page(k, false)
		for i := range p {
			if k<<logPageBits+uint64(i) > idx && p[i].flags&locSet != 0 {
				p[i] = packedLoc{}
				t.cur.dirty = true
				t.n--
			}
		}
	}
}

func (t *logTable) keys() []uint64 {
	keys := make([]uint64, 0, len(t.pages))
	for k := range t.pages {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i] < keys[j] })
	return keys
}

// Each calls fn for every index in the table, in increasing order.
func (t *logTable) Each(fn func(idx uint64, loc *EntryLoc)) {
	if t == nil {
		return
	}
	defer t.release()
	for _, k := range t.keys() {
		for i := 0; i < logPageSize; i++ {
			idx := k<<logPageBits | uint64(i)
			if l := t.Get(idx); l != nil {
				fn(idx, l)
			}
		}
	}
}

// String is for test failures.
func (p *logPool) String() string {
	return fmt.Sprintf("logPool{budget %d, resident %d, spilled %d, loaded %d}", p.budget, p.resident, p.spilled, p.loaded)
}
