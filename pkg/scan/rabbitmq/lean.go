package rabbitmq

// Releasing files: every scan (Scan of vhosts, store dirs and single
// files, Verify and ScanVHost's callers) makes each file's record findings
// as soon as the file is done (and handed to VHostOptions.EachFile, when
// set) and releases its records, gaps and markers; a vhost's queue
// indexes are read without their entries (ReadVHostQueuesRefs,
// lean_refs.go), so memory stays flat as the store grows. No caller keeps
// every record of a store.

import (
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
	// and the unreferenced-records one, whose sum unref holds.
	pre   []scan.Finding
	unref unrefSum
	path  string // the file's path, for unref's finding
	// valid and liveEnd are fileTotals': the bytes of the referenced
	// records and the end of the last one (file_summary.ets checks).
	valid, liveEnd int64
}

// findings hands over the file's findings but the hazard ones, in the
// order fileFindingsPart makes them, and forgets them.
func (lf *leanFile) findings() []scan.Finding {
	out := lf.pre // handed over, not copied
	if f, ok := lf.unref.finding(lf.path); ok {
		out = append(out, f)
	}
	lf.pre, lf.unref = nil, unrefSum{}
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
	lf.pre = fileFindingsPart(fs, s.ver, s.lrefs != nil, false, &lf)
	fs.lean = lf
	s.spillVictims(fs)
	fs.Records, fs.Gaps, fs.BadMarkers, fs.ShortFrames, fs.IndexEntries = nil, nil, nil, nil, nil
}
