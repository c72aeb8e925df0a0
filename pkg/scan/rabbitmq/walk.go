package rabbitmq

// The hot path: find every real record of one .rdq file held in memory,
// each position's frame read by the format (rfmt.StrictFrame).
// Like RabbitMQ's newest scanner every byte is a possible record start,
// but a candidate is accepted only on evidence (§3.5): Size ≥ 18, the
// frame fits, marker 0xFF, body[0] == 0x83 and the body is exactly one
// ETF term. The pre-filter (size plausibility, marker, magic) costs a few
// loads per position; the term walk runs only on framed candidates.
// Zero runs are skipped a word at a time: a window whose 8 bytes are all
// zero has Size 0, so only the last 7 positions of a run need a look.

import (
	"encoding/binary"
	"slices"

	rfmt "github.com/storectl/storectl/pkg/format/rabbitmq"
)

// minFrame is the smallest strict frame: 8 + 18 + 1 bytes.
const minFrame = rfmt.RDQSizeFieldLen + rfmt.RDQMinStrictSize + 1

// walk fills fs.Records (Status unset), Gaps, End, ValidEnd, Torn and
// BadMarkers from the file bytes b. reached, when not nil, is told about
// every rfmt.ReachedStep bytes how far the walk is (fileview.Stream: the
// pages behind go; the walk reads nothing before a gap's start again).
//
// The records found go to a pointer-free log (reused from file to file)
// and become Records at the end, fs.Records allocated once at its size:
// appending to it as it grew made a third more garbage than the Records
// and, the slice being of pointers, ran the write barriers of every copy.
// A walk cut short by a fault (a file that shrank: fileview.Guard) still
// makes the Records it found.
func walk(b []byte, fs *FileScan, reached func(off int64)) { walkCounted(b, fs, reached, nil) }

// walkCounted is walk that keeps *found, when found is not nil, at the
// number of records found so far (what reached may look at).
func walkCounted(b []byte, fs *FileScan, reached func(off int64), found *int) {
	log := walkLogs.get()
	defer func() {
		fs.Records = appendRecords(fs.Records, fs, log)
		walkLogs.put(log)
	}()
	var n int
	if found == nil {
		found = &n
	}
	walkFrames(b, fs, reached, func(p int, total int64, bad bool) {
		e := walkEntry{off: int64(p), total: total, bad: bad}
		if !bad {
			e.term = termCode(b[p+rfmt.RDQHeaderLen : p+int(total)-1])
		}
		copy(e.id[:], b[p+rfmt.RDQSizeFieldLen:])
		log = append(log, e)
		*found = len(log)
	})
}

// walkEntry is a record as walk finds it.
type walkEntry struct {
	off, total int64
	id         [16]byte
	term       uint8 // index into termNames
	bad        bool
}

var termNames = [...]string{"", rfmt.RecordBasicMessage, rfmt.RecordMC}

// termCode is termKind as an index into termNames.
func termCode(body []byte) uint8 {
	switch termKind(body) {
	case rfmt.RecordBasicMessage:
		return 1
	case rfmt.RecordMC:
		return 2
	}
	return 0
}

// walkLogs holds walk's logs for reuse.
var walkLogs reuseList[walkEntry]

// appendRecords appends the Records of log to rs, of fs's file.
func appendRecords(rs []*Record, fs *FileScan, log []walkEntry) []*Record {
	if len(log) == 0 {
		return rs
	}
	rs = slices.Grow(rs, len(log))
	var slab recordSlab
	for i := range log {
		e := &log[i]
		r := slab.next()
		*r = Record{Path: fs.Path, File: fs.Number, Offset: e.off, TotalSize: e.total,
			MsgID: e.id, Term: termNames[e.term], BadBody: e.bad}
		rs = append(rs, r)
	}
	return rs
}

// fileKeys are the join's keys of one file's records, in file order: a
// pointer-free list, reused from file to file.
type fileKeys struct{ s []recKey }

var keysLists reuseList[recKey]

func newFileKeys() *fileKeys { return &fileKeys{s: keysLists.get()} }

// free hands the list back for another file.
func (k *fileKeys) free() {
	keysLists.put(k.s)
	k.s = nil
}

// walkKeys walks b as walk does and appends the join key of every record
// walk would make to keys (file is the file's index), without making the
// Records: the join's prepass needs only their ids and places.
func walkKeys(b []byte, file int32, keys *fileKeys, reached func(off int64)) {
	var fs FileScan
	walkFrames(b, &fs, reached, func(p int, _ int64, _ bool) {
		key := recKey{file: file, k: int32(len(keys.s)), off: uint32(p)}
		copy(key.id[:], b[p+rfmt.RDQSizeFieldLen:])
		keys.s = append(keys.s, key)
	})
}

// walkFrames finds the records of b (a strict frame whose body is one
// term, or an aligned frame whose body is not: bad) and hands each one to
// rec, in file order, with its offset and TotalSize; it fills fs.Gaps,
// End, ValidEnd, Torn and BadMarkers.
func walkFrames(b []byte, fs *FileScan, reached func(off int64), rec func(p int, total int64, bad bool)) {
	n := len(b)
	p, gapStart := 0, 0
	next := n + 1 // the next offset to report
	if reached != nil {
		next = rfmt.ReachedStep
	}
	for n-p >= minFrame {
		if p >= next {
			reached(int64(gapStart))
			next = p + rfmt.ReachedStep
		}
		if binary.BigEndian.Uint64(b[p:]) == 0 {
			p = skipZeroWindow(b, p)
			continue
		}
		if f := rfmt.StrictFrame(b, p); f.Fits {
			switch {
			case f.OK && f.Term:
				if gapStart < p {
					fs.Gaps = append(fs.Gaps, mkGap(b, gapStart, p))
				}
				rec(p, int64(f.Size)+rfmt.RDQOverhead, false)
				p = f.End + 1
				gapStart = p
				continue
			case f.Term:
				fs.BadMarkers = append(fs.BadMarkers, int64(p))
			}
			if p == gapStart && f.OK && !hasRecordInside(b, p+1, f.End) {
				// An aligned frame (file start or right after a record)
				// whose body is no ETF term: every RabbitMQ scanner takes
				// it, its reader would fail on it. Taken only when no real
				// record starts inside it, so a misread frame never hides one.
				rec(p, int64(f.Size)+rfmt.RDQOverhead, true)
				p = f.End + 1
				gapStart = p
				continue
			}
		}
		p++
	}
	fs.ValidEnd = int64(gapStart)
	if gapStart == n {
		fs.End = "eof"
		return
	}
	tail := mkGap(b, gapStart, n)
	fs.Gaps = append(fs.Gaps, tail)
	switch {
	case tail.Zero:
		fs.End = "zero"
	case isTorn(b[gapStart:]):
		fs.End = "torn"
		fs.Torn = &tail
	default:
		fs.End = "garbage"
	}
}

// hasRecordInside reports whether a real record (strict candidate test)
// starts at any position of b[from:to).
func hasRecordInside(b []byte, from, to int) bool {
	for p := from; p < to && len(b)-p >= minFrame; p++ {
		if rfmt.StrictFrame(b, p).Record() {
			return true
		}
	}
	return false
}

// isTorn reports whether the tail t starts like a record cut by EOF: a
// partial size field, or a Size ≥ 16 that runs past the end (but stays
// under the broker's size cap).
func isTorn(t []byte) bool {
	if len(t) < rfmt.RDQSizeFieldLen {
		return true
	}
	s := binary.BigEndian.Uint64(t)
	return s >= rfmt.RDQMinSize && s <= rfmt.DefaultMaxEntrySize && s+rfmt.RDQOverhead > uint64(len(t))
}

func mkGap(b []byte, from, to int) Gap {
	g := Gap{Offset: int64(from), Length: int64(to - from), Zero: true}
	for _, c := range b[from:to] {
		if c != 0 {
			g.Zero = false
			break
		}
	}
	return g
}

// termKind classifies a body by its first tuple element without decoding
// it: <<131, 104, Arity, 119|115, Len:8, Name...>> (small atoms, OTP 26+)
// or <<131, 104, Arity, 118|100, Len:16, Name...>> (ATOM_UTF8_EXT /
// ATOM_EXT, as OTP 25 writes them in the 3.10 fixtures).
func termKind(body []byte) string {
	if len(body) < 5 || body[1] != 104 {
		return ""
	}
	var n, at int
	switch body[3] {
	case 115, 119:
		n, at = int(body[4]), 5
	case 100, 118:
		if len(body) < 6 {
			return ""
		}
		n, at = int(body[4])<<8|int(body[5]), 6
	default:
		return ""
	}
	if at+n > len(body) {
		return ""
	}
	switch string(body[at : at+n]) {
	case rfmt.RecordBasicMessage:
		return rfmt.RecordBasicMessage
	case rfmt.RecordMC:
		return rfmt.RecordMC
	}
	return ""
}

// skipZeroWindow returns the next position worth testing after a zero
// 8-byte window at p: no window can hold a non-zero size until it reaches
// the next non-zero byte, so only the 7 positions before that byte are
// left to try.
func skipZeroWindow(b []byte, p int) int {
	n := len(b)
	z := p + 8
	for z+8 <= n && binary.BigEndian.Uint64(b[z:]) == 0 {
		z += 8
	}
	for z < n && b[z] == 0 {
		z++
	}
	return max(p+1, z-7)
}

// recordSlab hands out Records from chunks: no allocation per record on
// the hot path. A file's records are kept and released together, so a
// chunk lives exactly as long as its records.
type recordSlab struct{ chunk []Record }

// recordChunk Records are allocated at a time (a few tens of KiB).
const recordChunk = 256

func (s *recordSlab) next() *Record {
	if len(s.chunk) == cap(s.chunk) {
		s.chunk = make([]Record, 0, recordChunk)
	}
	s.chunk = s.chunk[:len(s.chunk)+1]
	return &s.chunk[len(s.chunk)-1]
}
