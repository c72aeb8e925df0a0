package quorum

import "sort"

// logTable maps a replica's Raft indexes to where their entries are
// (Replica.Log). An entry is 40 pointer-free bytes in pages of
// logPageSize consecutive indexes, the file named by its number in the
// table's file list: a map of *EntryLoc had cost about 150 bytes an entry
// (the EntryLoc, its two string headers, the map slot), a third of
// verify's memory on a generated 1 GiB store, and every one of them was
// a pointer the collector walked.
type logTable struct {
	files []logFile
	byPth map[string]uint32
	pages map[uint64]*logPage
	n     int
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

func newLogTable() *logTable {
	return &logTable{byPth: map[string]uint32{}, pages: map[uint64]*logPage{}}
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

func (t *logTable) slot(idx uint64, create bool) *packedLoc {
	p := t.pages[idx>>logPageBits]
	if p == nil {
		if !create {
			return nil
		}
		p = new(logPage)
		t.pages[idx>>logPageBits] = p
	}
	return &p[idx&(logPageSize-1)]
}

// put sets idx to loc, in file number f (of t.file). With keepWAL, an
// index a WAL record already holds keeps it (a WAL entry wins over a
// segment entry of the same index).
func (t *logTable) put(f uint32, loc *EntryLoc, keepWAL bool) {
	s := t.slot(loc.Index, true)
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
	s := t.slot(idx, false)
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

// truncateAbove drops the indexes above idx.
func (t *logTable) truncateAbove(idx uint64) {
	for k, p := range t.pages {
		for i := range p {
			if k<<logPageBits+uint64(i) > idx && p[i].flags&locSet != 0 {
				p[i] = packedLoc{}
				t.n--
			}
		}
	}
}

// Each calls fn for every index in the table, in increasing order.
func (t *logTable) Each(fn func(idx uint64, loc *EntryLoc)) {
	if t == nil {
		return
	}
	keys := make([]uint64, 0, len(t.pages))
	for k := range t.pages {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i] < keys[j] })
	for _, k := range keys {
		p := t.pages[k]
		for i := range p {
			if p[i].flags&locSet != 0 {
				idx := k<<logPageBits | uint64(i)
				fn(idx, t.Get(idx))
			}
		}
	}
}
