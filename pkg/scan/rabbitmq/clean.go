package rabbitmq

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"

	"github.com/storectl/storectl/pkg/scan"
)

// readClean reads clean.dot, msg_store_index.ets and file_summary.ets of a
// store dir; nil when none exists. A dump that does not parse is kept as
// far as it parsed (the broker would do a dirty recovery instead).
func readClean(store string) (*CleanIndex, error) {
	c := &CleanIndex{byID: map[[16]byte]IndexEntry{}}
	any := false
	if _, err := os.Stat(filepath.Join(store, "clean.dot")); err == nil {
		c.CleanDot, any = true, true
	}
	read := func(name string) ([]byte, bool, error) {
		p := filepath.Join(store, name)
		st, err := os.Stat(p)
		if errors.Is(err, fs.ErrNotExist) {
			return nil, false, nil
		}
		if err != nil {
			return nil, false, err
		}
		if st.Size() > etsMaxFile {
			return nil, false, fmt.Errorf("%s: %d bytes, over the %d limit", p, st.Size(), etsMaxFile)
		}
		b, err := os.ReadFile(p)
		return b, err == nil, err
	}
	b, ok, err := read("msg_store_index.ets")
	if err != nil {
		return nil, err
	}
	if ok {
		any, c.HasIndex = true, true
		c.Index, _ = ParseIndexETS(b)
		for _, e := range c.Index {
			c.byID[e.MsgID] = e
		}
	}
	if b, ok, err = read("file_summary.ets"); err != nil {
		return nil, err
	}
	if ok {
		any, c.HasFileSummary = true, true
		c.Summaries, _ = ParseFileSummaryETS(b)
	}
	if !any {
		return nil, nil
	}
	return c, nil
}

// readCleanLean is readClean for lean mode: the index is a leanIndex
// (CleanIndex.Index stays nil).
func readCleanLean(store string) (*CleanIndex, *leanIndex, error) {
	c := &CleanIndex{}
	found := false
	if _, err := os.Stat(filepath.Join(store, "clean.dot")); err == nil {
		c.CleanDot, found = true, true
	}
	p := filepath.Join(store, "msg_store_index.ets")
	var li *leanIndex
	ok, err := indexStat(p)
	if err == nil && ok {
		li, err = readLeanIndex(p)
	}
	if err != nil {
		return nil, nil, err
	}
	if ok {
		found, c.HasIndex = true, true
	}
	p = filepath.Join(store, "file_summary.ets")
	if ok, err = indexStat(p); err != nil {
		return nil, nil, err
	}
	if ok {
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, nil, err
		}
		found, c.HasFileSummary = true, true
		c.Summaries, _ = ParseFileSummaryETS(b)
	}
	if !found {
		return nil, nil, nil
	}
	return c, li, nil
}

// indexFindings checks every msg_store_index.ets entry against the
// records found: the record at File/Offset must have that id and size.
func (s *scanner) indexFindings(v *VHostScan) []scan.Finding {
	if v.Clean == nil || !v.Clean.HasIndex {
		return nil
	}
	if s.lidx != nil {
		return s.lidx.findings(v)
	}
	type key struct{ file, off int64 }
	at := map[key]*Record{}
	byNum := map[int64]*FileScan{}
	for _, f := range v.Files {
		if f.Transient {
			continue
		}
		byNum[f.Number] = f
		for _, r := range f.Records {
			at[key{r.File, r.Offset}] = r
		}
	}
	var out []scan.Finding
	for _, e := range v.Clean.Index {
		r := at[key{e.File, e.Offset}]
		if r != nil && r.MsgID == e.MsgID && r.TotalSize == e.TotalSize {
			continue
		}
		path := filepath.ToSlash(filepath.Join(v.Dir, "msg_store_persistent", strconv.FormatInt(e.File, 10)+".rdq"))
		if f := byNum[e.File]; f != nil {
			path = f.Path
		}
		actual := "no record there"
		if r != nil {
			actual = fmt.Sprintf("record %s of %d bytes", r.ID(), r.TotalSize)
		}
		out = append(out, indexMismatchFinding(path, e, actual))
	}
	return out
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
		Expected: fmt.Sprintf("record %s of %d bytes", hexID(e.MsgID), e.TotalSize), Actual: actual,
		Details: map[string]any{"ref_count": e.RefCount, "file": e.File},
		Message: "msg_store_index.ets entry does not point at its record; a clean start would read the wrong bytes"}
}
