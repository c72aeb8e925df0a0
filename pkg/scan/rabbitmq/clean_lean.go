package rabbitmq

// The scan's view of msg_store_index.ets. No scan keeps the parsed dump
// or every record: the entries are kept outside the Go heap, sorted by msg
// id (the per-record "index_match" lookup), and each file's records are
// matched against the entries that point into the file while the records
// are still there (leanIndex.join); a later file with the same number
// overrides the places where it has a record, and the dump's last entry
// of an id is the one a lookup by id gives.

import (
	"cmp"
	"maps"
	"path/filepath"
	"slices"
	"strconv"

	"github.com/storectl/storectl/internal/fileview"
	"github.com/storectl/storectl/internal/offheap"
	"github.com/storectl/storectl/pkg/scan"
)

// cleanEnt is one msg_location object of the dump, 40 bytes. File,
// offset, size and ref count are stored narrow; an entry whose values do
// not fit (only a damaged dump has them) is wide, its values in
// leanIndex.wide (leanIndex.vals reads either).
type cleanEnt struct {
	id       [16]byte
	etsOff   uint32 // offset of the object's ETF bytes (a dump is at most etsMaxFile)
	ord      int32  // position among the dump's entries
	file     int32
	off      uint32
	size     uint32
	refCount int32
	place    uint8 // what the file it points into holds there: place*
	wide     bool
}

// entVals are an entry's values at full width.
type entVals struct{ refCount, file, off, size int64 }

// vals returns e's values.
func (li *leanIndex) vals(e *cleanEnt) entVals {
	if e.wide {
		return li.wide[e.ord]
	}
	return entVals{int64(e.refCount), int64(e.file), int64(e.off), int64(e.size)}
}

// newCleanEnt is e in compact form; wide values go to li.wide.
func (li *leanIndex) newCleanEnt(e IndexEntry, etsOff int64, ord int32) cleanEnt {
	c := cleanEnt{id: e.MsgID, etsOff: uint32(etsOff), ord: ord, file: int32(e.File), off: uint32(e.Offset),
		size: uint32(e.TotalSize), refCount: int32(e.RefCount)}
	if v := (entVals{e.RefCount, e.File, e.Offset, e.TotalSize}); li.vals(&c) != v {
		c.wide = true
		li.wide[ord] = v
	}
	return c
}

// What the scanned files hold at an entry's File/Offset.
const (
	placeNone  = iota // no record starts there (or no file has the number)
	placeMatch        // the entry's record
	placeOther        // another record (leanIndex.other)
)

// placeRec is the record found at an entry's place when it is not the
// entry's own.
type placeRec struct {
	id   [16]byte
	size int64
}

// leanIndex is msg_store_index.ets as the scan holds it. It is used from the
// scanner's ordered phase only (one file at a time, in file order).
type leanIndex struct {
	ents     *offheap.Buf[cleanEnt] // by id, then ord
	idx      idBuckets              // over ents
	byPlace  *offheap.Buf[int32]    // entry indices by file, off, ord
	other    map[int32]placeRec     // placeOther entries
	wide     map[int32]entVals      // by ord: the values of wide entries
	lastPath map[int64]string       // file number -> path of the last scanned file with it
}

// readLeanIndex reads the dump at p as ParseIndexETS does (the entries up
// to the first undecodable item) without holding it on the heap: the file
// is mapped, and decoded one object at a time. With dig, the entries with
// a positive ref count go to its digest instead (clean_digest.go).
func readLeanIndex(p string, dig *cleanDigest) (li *leanIndex, err error) {
	li = &leanIndex{ents: offheap.New[cleanEnt](), other: map[int32]placeRec{},
		lastPath: map[int64]string{}, wide: map[int32]entVals{}}
	// The dump is read front to back and let go as it is (Stream), and
	// unmapped before the sorts: its pages are not held with the entries.
	err = fileview.StreamFile(p, func(b []byte, reached func(int64)) error {
		n := int32(0)
		_ = eachIndexEntry(b, func(e IndexEntry, etsOff int64) {
			if dig != nil && e.RefCount > 0 {
				dig.add(&dig.ents, e.MsgID, e.File, e.Offset, e.TotalSize, e.RefCount)
			} else {
				li.ents.Append(li.newCleanEnt(e, etsOff, n))
			}
			n++
			reached(etsOff)
		})
		return nil
	})
	if err != nil {
		li.ents.Free()
		return nil, err
	}
	ents := li.ents.Slice()
	sortByID(ents, func(e *cleanEnt) *[16]byte { return &e.id },
		func(a, b *cleanEnt) int { return cmp.Compare(a.ord, b.ord) })
	li.idx = newIDBuckets(len(ents), func(i int) *[16]byte { return &ents[i].id })
	li.byPlace = li.placeOrder()
	return li, nil
}

// placeKey is an entry's place with its dump position, for sorting.
type placeKey struct {
	file, off int64
	ord, idx  int32 // idx: the entry's index in ents
}

// placeOrder returns the entry indices ordered by file, offset and dump
// position. The keys are copied out (off the heap, freed on return) and
// sorted contiguously: a sort of indices comparing through ents would
// jump around it, 230 ms for 350k entries against tens here.
func (li *leanIndex) placeOrder() *offheap.Buf[int32] {
	ents := li.ents.Slice()
	keys := offheap.New[placeKey]()
	defer keys.Free()
	for i := range ents {
		v := li.vals(&ents[i])
		keys.Append(placeKey{file: v.file, off: v.off, ord: ents[i].ord, idx: int32(i)})
	}
	slices.SortFunc(keys.Slice(), func(a, b placeKey) int {
		switch {
		case a.file != b.file:
			return cmp.Compare(a.file, b.file)
		case a.off != b.off:
			return cmp.Compare(a.off, b.off)
		}
		return cmp.Compare(a.ord, b.ord)
	})
	out := offheap.New[int32]()
	for _, k := range keys.Slice() {
		out.Append(k.idx)
	}
	return out
}

// lookup returns the dump's last entry with id, or nil.
func (li *leanIndex) lookup(id [16]byte) *cleanEnt {
	ents := li.ents.Slice()
	if i := li.idx.last(&id, func(i int) *[16]byte { return &ents[i].id }); i >= 0 {
		return &ents[i]
	}
	return nil
}

// indexMatch is classify's verdict for a record of fs, and the entry of
// its id when there is one.
func (li *leanIndex) indexMatch(r *Record) (string, IndexEntry) {
	e := li.lookup(r.MsgID)
	if e == nil {
		return "absent", IndexEntry{}
	}
	v := li.vals(e)
	ie := IndexEntry{MsgID: e.id, RefCount: v.refCount, File: v.file, Offset: v.off, TotalSize: v.size}
	if v.file == r.File && v.off == r.Offset && v.size == r.TotalSize {
		return "match", ie
	}
	return "mismatch", ie
}

// join records what the non-transient file fs holds at the place of each
// entry pointing into it. A later file with the same number overrides
// where it has a record.
func (li *leanIndex) join(fs *FileScan) {
	li.lastPath[fs.Number] = fs.Path
	ents, byPlace := li.ents.Slice(), li.byPlace.Slice()
	i, _ := slices.BinarySearchFunc(byPlace, fs.Number, func(k int32, n int64) int { return cmp.Compare(li.vals(&ents[k]).file, n) })
	recs := fs.Records
	j := 0
	for ; i < len(byPlace) && li.vals(&ents[byPlace[i]]).file == fs.Number; i++ {
		k := byPlace[i]
		e := &ents[k]
		v := li.vals(e)
		for j < len(recs) && recs[j].Offset < v.off {
			j++
		}
		if j < len(recs) && recs[j].Offset == v.off {
			if r := recs[j]; r.MsgID == e.id && r.TotalSize == v.size {
				e.place = placeMatch
				delete(li.other, k)
			} else {
				e.place = placeOther
				li.other[k] = placeRec{r.MsgID, r.TotalSize}
			}
		}
	}
}

// findings are indexFindings' findings: one per entry whose place does
// not hold its record, in the dump's order.
func (li *leanIndex) findings(v *VHostScan) []scan.Finding {
	ents := li.ents.Slice()
	unread := unreadFileNums(v) // what such a file holds is unknown
	var bad []int32
	for i := range ents {
		if ents[i].place != placeMatch && !unread[li.vals(&ents[i]).file] {
			bad = append(bad, int32(i))
		}
	}
	slices.SortFunc(bad, func(a, b int32) int { return int(ents[a].ord) - int(ents[b].ord) })
	var out []scan.Finding
	for _, k := range bad {
		e := &ents[k]
		ev := li.vals(e)
		path, ok := li.lastPath[ev.file]
		if !ok {
			path = filepath.ToSlash(filepath.Join(v.Dir, "msg_store_persistent", strconv.FormatInt(ev.file, 10)+".rdq"))
		}
		actual := noRecordThere
		if r, ok := li.other[k]; ok {
			actual = recordDesc(r.id, r.size)
		}
		out = append(out, indexMismatchFinding(path, IndexEntry{MsgID: e.id, RefCount: ev.refCount, File: ev.file,
			Offset: ev.off, TotalSize: ev.size}, actual))
	}
	return out
}

// cleanIndexFindingsLean checks every msg_store_index.ets object (§6):
// the record at File/Offset has that id and size, and RefCount equals the
// number of queue index references; referenced ids the index lacks are
// reported too. The findings come, in the dump's order, from the entries
// and their places (leanIndex.join), the id table (first copies,
// references) and the queue names of the references.
func (s *scanner) cleanIndexFindingsLean(v *VHostScan, cs *cleanState) []scan.Finding {
	li := s.lidx
	ents := li.ents.Slice()
	// The dump's order. Without a digest ord numbers the entries 0..n-1,
	// so the order is the inverse permutation (no sort); with one, the
	// entries held are some of them, sorted.
	order := offheap.New[int32]()
	defer order.Free()
	for range ents {
		order.Append(0)
	}
	if s.cdig == nil {
		for i := range ents {
			order.Slice()[ents[i].ord] = int32(i)
		}
	} else {
		for i := range ents {
			order.Slice()[i] = int32(i)
		}
		slices.SortFunc(order.Slice(), func(a, b int32) int { return cmp.Compare(ents[a].ord, ents[b].ord) })
	}
	refsKnown := v.Queues != nil && s.lrefs != nil
	// A ref count is compared only when every queue index was read: a
	// queue dir that could not be read holds references of its own.
	countsKnown := refsKnown && len(v.Queues.Unreadable) == 0
	// An entry placing its id in a file that could not be read: what is
	// there is unknown, not "no record there".
	unread := unreadFileNums(v)
	refs := func(id [16]byte) []string {
		if e := s.seen.get(id); e.set > 0 && refsKnown {
			return s.lrefs.sets[e.set-1]
		}
		return nil
	}
	// verify looks in numbered persistent files only.
	locFail := func(e *cleanEnt) bool {
		return (e.place != placeMatch || li.vals(e).file < 0) && !unread[li.vals(e).file]
	}
	copies := s.firstCopies(ents, locFail)
	var out []scan.Finding
	for _, k := range order.Slice() {
		e := &ents[k]
		ev := li.vals(e)
		var n *int64
		if countsKnown {
			c := int64(len(refs(e.id)))
			n = &c
		}
		if !locFail(e) && (n == nil || ev.refCount == *n) {
			continue // no finding: skip making one
		}
		var loc *entryMiss
		if locFail(e) {
			loc = &entryMiss{actual: noRecordThere}
			if r, ok := li.other[k]; ok && ev.file >= 0 {
				loc.actual = recordDesc(r.id, r.size)
			}
			if c, ok := copies[k]; ok {
				loc.found = &c
			}
		}
		entry := IndexEntry{MsgID: e.id, RefCount: ev.refCount, File: ev.file, Offset: ev.off, TotalSize: ev.size}
		if f, ok := indexEntryFinding(cs.indexPath, int64(e.etsOff), entry, loc, n); ok {
			out = append(out, f)
		}
	}
	if !refsKnown || s.cdig != nil { // the digests agreed: every referenced id has its entry
		return out
	}
	// Referenced ids the index lacks, in id order (the table's, which is
	// the hex order).
	s.seen.each(func(b [16]byte, e idEntry) bool {
		if e.set > 0 && li.lookup(b) == nil {
			qs := s.lrefs.sets[e.set-1]
			out = append(out, indexLacksFinding(cs.indexPath, hexID(b), len(qs), qs))
		}
		return true
	})
	return out
}

// firstCopies returns, for each entry (index into ents) that bad says
// does not hold its record, where verify's map of the persistent store's
// records by id puts the entry's id: its first copy in the numbered files,
// in file order. The id table knows the file and the offset; the size
// takes a walk of the file (recordsOf), so the entries are grouped by
// file and each file is walked at most once.
func (s *scanner) firstCopies(ents []cleanEnt, bad func(*cleanEnt) bool) map[int32]copyRec {
	need := map[int32][]int32{} // file (1 + index in s.paths) -> entries
	for k := range ents {
		if e := &ents[k]; bad(e) {
			// Non-numbered files come last: a first copy there means no
			// numbered file has the id.
			if p := s.seen.get(e.id).path(); p > 0 && s.nums[p-1] >= 0 {
				need[p] = append(need[p], int32(k))
			}
		}
	}
	out := map[int32]copyRec{}
	for _, p := range slices.Sorted(maps.Keys(need)) {
		recs := s.recordsOf(p)
		for _, k := range need[p] {
			if r, ok := recs[ents[k].id]; ok {
				out[k] = copyRec{path: s.paths[p-1], off: r[0], size: r[1]}
			}
		}
	}
	return out
}

// copyRec is where a record is.
type copyRec struct {
	path      string
	off, size int64
}

// unreadFileNums are the numbers of the vhost's persistent .rdq files the
// scan could not read (nil when it read them all).
func unreadFileNums(v *VHostScan) map[int64]bool {
	var m map[int64]bool
	for _, f := range v.Files {
		if f.Err != nil && !f.Transient && f.Number >= 0 {
			if m == nil {
				m = map[int64]bool{}
			}
			m[f.Number] = true
		}
	}
	return m
}
