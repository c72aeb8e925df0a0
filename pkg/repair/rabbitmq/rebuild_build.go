package rabbitmq

// Building the two tables from the scan, in the broker's shape (§4.1,
// §4.2), and encoding them as ets:tab2file dumps.

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/storectl/storectl/internal/storefile"
	"github.com/storectl/storectl/pkg/format/etf"

	"github.com/storectl/storectl/pkg/format"
	rfmt "github.com/storectl/storectl/pkg/format/rabbitmq"
	rscan "github.com/storectl/storectl/pkg/scan/rabbitmq"
)

// rbTable is one rebuilt table: its dump and how it compares with the
// file on disk.
type rbTable struct {
	data                    []byte
	objects, live           int
	existing, detail        string
	added, removed, changed int
}

// rbBuilt is both tables of one store.
type rbBuilt struct {
	index, summary *rbTable
	notes          []string
}

// rbExisting is a saved table as found on disk.
type rbExisting struct {
	raw    []byte
	file   *rfmt.ETSFile // nil when absent or not a readable dump
	absent bool
	err    error // why it is unreadable
}

// rbReadExisting reads a saved table; decode problems are kept in err.
func rbReadExisting(p string) (rbExisting, error) {
	st, err := os.Stat(p)
	if errors.Is(err, fs.ErrNotExist) {
		return rbExisting{absent: true}, nil
	}
	if err != nil {
		return rbExisting{}, err
	}
	if st.Size() > rbMaxSmallFile {
		return rbExisting{err: fmt.Errorf("%d bytes, over the %d this tool reads", st.Size(), rbMaxSmallFile)}, nil
	}
	b, err := storefile.ReadFile(p)
	if err != nil {
		return rbExisting{}, err
	}
	return rbParseExisting(b, filepath.Base(p)), nil
}

// rbParseExisting decodes a saved dump's disk_log framing and terms; any
// problem is kept in err (the file is then rebuilt, never trusted).
func rbParseExisting(b []byte, name string) rbExisting {
	e := rbExisting{raw: b}
	e.file, e.err = rfmt.ReadETSInfo(b) // the objects: rbTyped
	if e.err == nil && !e.file.Closed {
		e.err = errors.New("the disk_log was not closed properly")
	}
	if e.err != nil {
		e.file, e.err = nil, format.WithPath(e.err, name)
	}
	return e
}

// rbBuild rebuilds both tables of v's persistent store and compares them
// with the files on disk.
func rbBuild(root, vhostDir, brokerVersion string, v *rscan.VHostScan, col *rbCollect) (*rbBuilt, error) {
	store := filepath.Join(vhostDir, rbStoreDir)
	exIdx, err := rbReadExisting(filepath.Join(store, rbIndexFile))
	if err != nil {
		return nil, err
	}
	exSum, err := rbReadExisting(filepath.Join(store, rbSummaryFile))
	if err != nil {
		return nil, err
	}
	out := &rbBuilt{}
	oldLocs, oldSums := rbTyped(&exIdx, &exSum)
	legacy, why := rbLegacyStyle(exSum, oldSums, brokerVersion, v)
	out.notes = append(out.notes, why)
	enc := rfmt.ETSEncodeOptions{Node: rbNode(root, exIdx, exSum), Atoms: etf.AtomsUTF8}
	if legacy {
		enc.Atoms = etf.AtomsLatin1
	}
	if a, ok := rbAtoms(exIdx, exSum); ok {
		enc.Atoms = a
	}

	locs, sums, notes := rbObjects(v, col, legacy)
	out.notes = append(out.notes, notes...)
	locs = rbOrderLike(locs, oldLocs)

	ix := &rbTable{objects: len(locs)}
	for _, l := range locs {
		if l.RefCount > 0 {
			ix.live++
		}
	}
	rbCompareIndex(ix, exIdx, oldLocs, locs)
	o := enc
	if exIdx.file != nil && exIdx.err == nil {
		o.Info = exIdx.file.Info
	}
	if ix.data, err = rfmt.EncodeMsgStoreIndex(locs, o); err != nil {
		return nil, err
	}
	out.index = ix

	sm := &rbTable{objects: len(sums)}
	rbCompareSummary(sm, exSum, oldSums, sums)
	o = enc
	if exSum.file != nil && exSum.err == nil {
		o.Info = exSum.file.Info
	}
	if sm.data, err = rfmt.EncodeFileSummary(sums, o); err != nil {
		return nil, err
	}
	out.summary = sm
	return out, nil
}

// rbTyped decodes the objects of readable dumps; a dump whose objects are
// not the broker's records becomes unreadable (err set; its info item is
// then not reused).
func rbTyped(exIdx, exSum *rbExisting) ([]rfmt.MsgLocation, []rfmt.FileSummary) {
	var locs []rfmt.MsgLocation
	var sums []rfmt.FileSummary
	var err error
	if exIdx.file != nil {
		if locs, err = rfmt.ReadMsgStoreIndex(exIdx.raw); err != nil {
			exIdx.err, locs = format.WithPath(err, rbIndexFile), nil
		}
	}
	if exSum.file != nil {
		if sums, err = rfmt.ReadFileSummary(exSum.raw); err != nil {
			exSum.err, sums = format.WithPath(err, rbSummaryFile), nil
		}
	}
	return locs, sums
}

// rbObjects derives the index entries and file summaries from the scan.
// Index: every msg id found in a numbered persistent .rdq, at its first
// copy, with RefCount = its references from the queue indexes (0 when no
// queue references it: the broker keeps such entries until compaction, as
// both fixtures' clean-shutdown dumps show). Summary: one per numbered
// .rdq; ValidTotalSize sums the entries with RefCount > 0; FileSize is the
// file size, except for the current file with bytes after its last record
// (a torn or garbage tail), where it is the end of that record, so that
// the clean start's truncation of the current file at FileSize cuts the
// tail.
func rbObjects(v *rscan.VHostScan, col *rbCollect, legacy bool) ([]rfmt.MsgLocation, []rfmt.FileSummary, []string) {
	locs := col.locs
	var sums []rfmt.FileSummary
	var notes []string
	var files []*rscan.FileScan
	for _, f := range v.Files {
		if f.Transient {
			continue
		}
		if f.Number < 0 {
			notes = append(notes, fmt.Sprintf("%s is not named N.rdq: the broker ignores it, so it gets no summary and its records no index entries", f.Path))
			continue
		}
		files = append(files, f)
	}
	for i, f := range files {
		s := rfmt.FileSummary{File: f.Number, FileSize: f.Size, ValidTotalSize: col.valid[f]}
		if f.Current && f.ValidEnd < f.Size {
			s.FileSize = f.ValidEnd
			notes = append(notes, fmt.Sprintf("%s, the current file, has %d bytes after its last record (%s): its summary says %d bytes, and a clean start truncates it there", f.Path, f.Size-f.ValidEnd, f.End, f.ValidEnd))
		}
		if legacy {
			s.Left, s.Right, s.Readers = etf.Atom("undefined"), etf.Atom("undefined"), int64(0)
			if i > 0 {
				s.Left = files[i-1].Number
			}
			if i+1 < len(files) {
				s.Right = files[i+1].Number
			}
		}
		sums = append(sums, s)
	}
	return locs, sums, notes
}

// rbCollect is what the rebuild keeps of the scan's records, which it
// takes file by file (rscan.VHostOptions.EachFile): the index entries and
// each file's bytes of referenced records. Only a store with clean.dot
// can be rebuilt, so only there are they kept.
type rbCollect struct {
	locs  []rfmt.MsgLocation
	valid map[*rscan.FileScan]int64
}

// file takes one scanned file's records: every msg id found in a numbered
// persistent .rdq, at its first copy, with RefCount = its references from
// the queue indexes.
func (c *rbCollect) file(v *rscan.VHostScan, f *rscan.FileScan) error {
	if v.Clean == nil || !v.Clean.CleanDot || f.Transient || f.Number < 0 {
		return nil
	}
	if c.valid == nil {
		c.valid = map[*rscan.FileScan]int64{}
	}
	for _, r := range f.Records {
		if r.Status == rscan.StatusDuplicate {
			continue
		}
		l := rfmt.MsgLocation{MsgID: r.MsgID, RefCount: int64(len(r.ReferencedBy)), File: f.Number, Offset: r.Offset, TotalSize: r.TotalSize}
		if l.RefCount > 0 {
			c.valid[f] += l.TotalSize
		}
		c.locs = append(c.locs, l)
	}
	return nil
}

// rbOrderLike orders the entries as the file on disk has them and appends
// the others by file and offset. An ETS set is dumped in hash-table order,
// which depends on the emulator's internal hash and the table's growth
// history and cannot be reproduced; keeping the old order keeps an
// unchanged table byte-identical and a changed one a small diff.
func rbOrderLike(locs, old []rfmt.MsgLocation) []rfmt.MsgLocation {
	pos := make(map[[16]byte]int, len(old))
	for i, l := range old {
		if _, ok := pos[l.MsgID]; !ok {
			pos[l.MsgID] = i
		}
	}
	out := append([]rfmt.MsgLocation(nil), locs...)
	sort.SliceStable(out, func(i, j int) bool {
		pi, oki := pos[out[i].MsgID]
		pj, okj := pos[out[j].MsgID]
		switch {
		case oki && okj:
			return pi < pj
		case oki != okj:
			return oki
		case out[i].File != out[j].File:
			return out[i].File < out[j].File
		}
		return out[i].Offset < out[j].Offset
	})
	return out
}

// rbLegacyStyle says whether summaries are written the ≤3.12 way (Left and
// Right are the neighbouring file numbers, Readers 0) rather than the 3.13+
// way (all three undefined), and why: from the existing file_summary.ets,
// else the configured broker version, else the message terms in the files.
func rbLegacyStyle(ex rbExisting, old []rfmt.FileSummary, brokerVersion string, v *rscan.VHostScan) (bool, string) {
	for _, s := range old {
		if _, ok := s.Readers.(int64); ok {
			return true, "file summaries in the ≤3.12 shape (neighbour files, reader count 0), as in the existing file_summary.ets"
		}
		return false, "file summaries in the 3.13+ shape (unused fields undefined), as in the existing file_summary.ets"
	}
	if maj, min, ok := rbVersion(brokerVersion); ok {
		if maj < 3 || maj == 3 && min < 13 {
			return true, "file summaries in the ≤3.12 shape, for broker version " + brokerVersion
		}
		return false, "file summaries in the 3.13+ shape, for broker version " + brokerVersion
	}
	terms, _ := v.Layout["terms"].(map[string]int)
	if terms["basic_message"] > 0 && terms["mc"] == 0 {
		return true, "file summaries in the ≤3.12 shape: the files hold #basic_message{} terms only (pass --broker-version if this is 3.13 with message containers off)"
	}
	return false, "file summaries in the 3.13+ shape: the files hold #mc{} terms (or none)"
}

// rbVersion parses the major and minor of "3.13.7".
func rbVersion(s string) (maj, min int, ok bool) {
	p := strings.SplitN(s, ".", 3)
	if len(p) < 2 {
		return 0, 0, false
	}
	a, err1 := strconv.Atoi(p[0])
	b, err2 := strconv.Atoi(p[1])
	return a, b, err1 == nil && err2 == nil
}

// rbAtoms finds the atom encoding of a readable existing dump: the one
// that re-encodes its info item byte for byte.
func rbAtoms(exs ...rbExisting) (etf.AtomEncoding, bool) {
	for _, e := range exs {
		if e.file == nil {
			continue
		}
		for _, a := range []etf.AtomEncoding{etf.AtomsLatin1, etf.AtomsUTF8} {
			if b, err := etf.EncodeTerm(e.file.Info, a); err == nil && bytes.Equal(b, e.file.InfoRaw) {
				return a, true
			}
		}
	}
	return 0, false
}

// rbNode is the node name for a built info: from an existing dump, else
// the node dir's name (rabbit@host), else the encoder's default.
func rbNode(root string, exs ...rbExisting) string {
	for _, e := range exs {
		if e.file != nil {
			if n, ok := e.file.InfoValue("node").(etf.Atom); ok && n != "" {
				return string(n)
			}
		}
	}
	if b := filepath.Base(root); strings.Contains(b, "@") {
		return b
	}
	return ""
}
