package rabbitmq

// Lean mode: what Scan (storectl scan) needs from ScanVHost is the
// findings and the per-file summary, not the records. In lean mode each
// file's record findings are made as soon as the file is done and its
// records, gaps and markers are released, and the queue indexes are read
// without their entries (ReadVHostQueuesRefs, lean_refs.go), so memory stays flat
// as the store grows. ScanVHost's own callers (verify, truncate, salvage,
// harden, rebuild) keep the detailed result.

import (
	"sync"

	"github.com/storectl/storectl/internal/offheap"
	"github.com/storectl/storectl/pkg/scan"
)

// leanFile is what a released file keeps.
type leanFile struct {
	done       bool
	records    int
	firstValid int64
	lastValid  int64
	// pre holds the file's findings except the hazard ones, whose
	// severity depends on every file's terms (brokerVersion.writtenBy313),
	// and the unreferenced-record ones, which are in unref until the end
	// of the scan: in a store awaiting compaction they are most findings,
	// and kept compact they do not add to the walk's peak.
	pre []scan.Finding
	// unref collects them while the file's findings are made; release
	// then moves them to the scan's unrefStore, rows [unrefFrom,
	// unrefFrom+unrefN) of unrefs.
	unref             []unrefRecord
	unrefs            *unrefStore
	unrefFrom, unrefN int
	path              string // the file's path, for unref's findings
	// valid and liveEnd are fileTotals': the bytes of the referenced
	// records and the end of the last one (file_summary.ets checks).
	valid, liveEnd int64
}

// unrefRecord is an unreferenced record whose finding goes before pre[at].
type unrefRecord struct {
	at        int
	off, size int64
	id        [16]byte
}

// unrefStore holds the unreferenced records of every released file until
// the end of the scan, outside the Go heap (internal/offheap): in a store
// awaiting compaction they are a twentieth of the records or more, and on
// the heap they cost the collector's headroom on top of their 40 bytes.
// It is safe for concurrent use.
type unrefStore struct {
	mu  sync.Mutex
	buf *offheap.Buf[unrefRecord]
}

// add appends recs and returns the row of the first.
func (u *unrefStore) add(recs []unrefRecord) int {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.buf == nil {
		u.buf = offheap.New[unrefRecord]()
	}
	from := u.buf.Len()
	copy(u.buf.Extend(len(recs)), recs)
	return from
}

// rows returns a copy of rows [from, from+n).
func (u *unrefStore) rows(from, n int) []unrefRecord {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]unrefRecord(nil), u.buf.Slice()[from:from+n]...)
}

// free gives the rows' memory back; the store is empty afterwards.
func (u *unrefStore) free() {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.buf != nil {
		u.buf.Free()
		u.buf = nil
	}
}

// keep moves the records lf.unref collected to u.
func (lf *leanFile) keep(u *unrefStore) {
	if len(lf.unref) == 0 {
		lf.unref = nil
		return
	}
	lf.unrefs, lf.unrefFrom, lf.unrefN = u, u.add(lf.unref), len(lf.unref)
	lf.unref = nil
}

// findings hands over the file's findings but the hazard ones, in the
// order fileFindingsPart made them, and forgets them.
func (lf *leanFile) findings() []scan.Finding {
	pre, unref := lf.pre, lf.unref
	if lf.unrefN > 0 {
		unref = lf.unrefs.rows(lf.unrefFrom, lf.unrefN)
	}
	lf.pre, lf.unref, lf.unrefs, lf.unrefN = nil, nil, nil, 0
	if len(unref) == 0 {
		return pre // handed over, not copied
	}
	out := make([]scan.Finding, 0, len(pre)+len(unref))
	for i, j := 0, 0; i <= len(pre); i++ {
		for ; j < len(unref) && unref[j].at == i; j++ {
			u := &unref[j]
			out = append(out, unreferencedFinding(scan.Finding{Path: lf.path, Offset: u.off, Length: u.size,
				MsgID: hexID(u.id), Repair: scan.RepairNone}))
		}
		if i < len(pre) {
			out = append(out, pre[i])
		}
	}
	return out
}

// recordSpan returns the record count and first/last record offsets (-1
// when there is none) of a file, released or not.
func recordSpan(f *FileScan) (n int, first, last int64) {
	if f.lean.done {
		return f.lean.records, f.lean.firstValid, f.lean.lastValid
	}
	first, last = -1, -1
	if n = len(f.Records); n > 0 {
		first, last = f.Records[0].Offset, f.Records[n-1].Offset
	}
	return n, first, last
}

// release makes the file's findings that do not depend on other files
// and drops its per-record data. It runs after finish (hazards known).
func (s *scanner) release(fs *FileScan) {
	n, first, last := recordSpan(fs)
	lf := leanFile{done: true, records: n, firstValid: first, lastValid: last, path: fs.Path}
	_, lf.valid, lf.liveEnd = fileTotals(fs)
	lf.pre = fileFindingsPart(fs, s.ver, s.refs != nil, false, &lf)
	lf.keep(s.unrefs)
	fs.lean = lf
	s.spillVictims(fs)
	fs.Records, fs.Gaps, fs.BadMarkers, fs.ShortFrames = nil, nil, nil, nil
}
