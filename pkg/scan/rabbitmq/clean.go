package rabbitmq

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/storectl/storectl/internal/storefile"
	"github.com/storectl/storectl/pkg/scan"
)

// readClean reads clean.dot, msg_store_index.ets and file_summary.ets of a
// store dir; nil when none exists. A dump that does not parse is kept as
// far as it parsed (the broker would do a dirty recovery instead). The
// index is a leanIndex, read from the mapped file; with digest, the
// entries with a positive ref count are only digested (clean_digest.go).
func readClean(store string, digest bool) (*CleanIndex, *leanIndex, *cleanDigest, error) {
	c := &CleanIndex{}
	found := false
	if _, err := os.Stat(filepath.Join(store, "clean.dot")); err == nil {
		c.CleanDot, found = true, true
	}
	p := filepath.Join(store, "msg_store_index.ets")
	var li *leanIndex
	var dig *cleanDigest
	ok, err := indexStat(p)
	switch {
	case err != nil || !ok:
	default:
		if digest {
			dig = newCleanDigest()
		}
		li, err = readLeanIndex(p, dig)
	}
	if err != nil {
		return nil, nil, nil, err
	}
	if ok {
		found, c.HasIndex = true, true
	}
	p = filepath.Join(store, "file_summary.ets")
	if ok, err = indexStat(p); err != nil {
		return nil, nil, nil, err
	}
	if ok {
		b, err := storefile.ReadFile(p)
		if err != nil {
			return nil, nil, nil, err
		}
		found, c.HasFileSummary = true, true
		c.Summaries, _ = ParseFileSummaryETS(b)
	}
	if !found {
		return nil, nil, nil, nil
	}
	return c, li, dig, nil
}

// indexStat reports whether the clean-shutdown dump p exists and is not
// over etsMaxFile (readClean asks it of both dumps).
func indexStat(p string) (bool, error) {
	st, err := os.Stat(p)
	if os.IsNotExist(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if st.Size() > etsMaxFile {
		return false, fmt.Errorf("%s: %d bytes, over the %d limit", p, st.Size(), etsMaxFile)
	}
	return true, nil
}

// indexFindings checks every msg_store_index.ets entry against the
// records found: the record at File/Offset must have that id and size.
func (s *scanner) indexFindings(v *VHostScan) []scan.Finding {
	if v.Clean == nil || !v.Clean.HasIndex {
		return nil
	}
	if s.lidx == nil {
		return nil // digested and agreeing (clean_digest.go)
	}
	return s.lidx.findings(v) // with a digest: the entries it did not take
}

// noRecordThere is what an index entry's place holds when no record
// starts there (the Actual of the index findings).
const noRecordThere = "no record there"

// recordDesc describes a record as the index findings' Expected and
// Actual do.
func recordDesc(id [16]byte, size int64) string {
	return fmt.Sprintf("record %s of %d bytes", hexID(id), size)
}

// indexMismatchFinding is the finding of an index entry whose place at
// path does not hold its record; actual says what is there.
func indexMismatchFinding(path string, e IndexEntry, actual string) scan.Finding {
	sev := scan.Error
	if e.RefCount <= 0 {
		sev = scan.Warning
	}
	return scan.Finding{Code: CodeIndexMismatch, Severity: sev, Path: path, Offset: e.Offset,
		Length: e.TotalSize, MsgID: hexID(e.MsgID), Repair: scan.RepairRebuildIndex,
		Expected: recordDesc(e.MsgID, e.TotalSize), Actual: actual,
		Details: map[string]any{"ref_count": e.RefCount, "file": e.File},
		Message: "msg_store_index.ets entry does not point at its record; a clean start would read the wrong bytes"}
}
