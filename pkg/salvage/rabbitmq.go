package salvage

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/storectl/storectl/internal/storefile"
	rfmt "github.com/storectl/storectl/pkg/format/rabbitmq"
	"github.com/storectl/storectl/pkg/scan"
	rscan "github.com/storectl/storectl/pkg/scan/rabbitmq"
)

// Options say what an export selects.
type Options struct {
	Select []Selection
	// BrokerVersions are the RabbitMQ versions whose scanner misreads make
	// a message at-risk (any of them); empty: every version the scanner
	// models (ModeledVersions: the union over them).
	BrokerVersions []string
}

// ModeledVersions are the RabbitMQ versions at the ends of every scanner
// generation's range the scanner models (rscan.Versions*): at-risk without
// a broker version is the union of what each of them drops.
func ModeledVersions() []string {
	var out []string
	for _, r := range []string{rscan.VersionsGen1, rscan.VersionsGen2, rscan.VersionsOffByNine, rscan.VersionsGen3Unfixed} {
		for _, v := range strings.Split(r, "-") {
			if !slices.Contains(out, v) {
				out = append(out, v)
			}
		}
	}
	return out
}

func (o *Options) has(s Selection) bool {
	for _, x := range o.Select {
		if x == s || x == SelectAll {
			return true
		}
	}
	return false
}

// Report summarises an export.
type Report struct {
	Store    string         `json:"store"`
	Out      string         `json:"out"`
	Selected int            `json:"selected"`
	Bytes    int64          `json:"bytes"` // body bytes written
	By       map[string]int `json:"by_selection"`
	// Missing lists referenced RabbitMQ msg ids no .rdq holds at all:
	// nothing can be exported for them.
	Missing []MissingRef `json:"missing,omitempty"`
	// Damaged lists the quorum queue messages whose log entry fails its
	// checksum or CRC (exported only with --select crc-damaged).
	Damaged []DamagedEntry `json:"damaged,omitempty"`
	// Skipped counts records that matched but could not be decoded.
	Skipped int `json:"skipped"`
	// Resumed counts selected messages an earlier run of the same export
	// had written (not written again); Filtered those the filters (queue,
	// topic, id, time) left out; Written the ones written in this run.
	Resumed  int      `json:"resumed"`
	Filtered int      `json:"filtered"`
	Written  int      `json:"written"`
	Notes    []string `json:"notes,omitempty"`
	// Unread names each store file (or queue index) that could not be
	// read, and why: what it holds is not in the export and the selection
	// is incomplete (the command exits 3).
	Unread []string `json:"unread,omitempty"`
	// UnreadFiles are the store files among them, relative to the data dir
	// (once each): the report names each one (storectl.file.unreadable).
	UnreadFiles []string `json:"unread_files,omitempty"`
	// Versions are the broker versions at-risk was checked for.
	Versions []string `json:"at_risk_versions,omitempty"`
}

// MissingRef is a referenced msg id with no record anywhere.
type MissingRef struct {
	VHost  string   `json:"vhost,omitempty"`
	MsgID  string   `json:"msg_id,omitempty"`
	Queues []string `json:"queues"`
	// RocketMQ: the consume queue unit that points at no record.
	Topic       string `json:"topic,omitempty"`
	QueueID     *int32 `json:"queue_id,omitempty"`
	QueueOffset *int64 `json:"queue_offset,omitempty"`
	PhyOffset   *int64 `json:"phy_offset,omitempty"`
	Why         string `json:"why,omitempty"`
}

// ExportRabbitMQ selects messages from every vhost of cfg (VHostDirs, or
// StoreDirs without queue indexes: then only all is meaningful) and adds
// them to w. Records are taken in file order, first copy of each id only
// (later duplicates are skipped); msg_store_transient is included in all.
func ExportRabbitMQ(ctx context.Context, cfg rscan.Config, o Options, w *Writer) (*Report, error) {
	rep := &Report{Store: StoreRabbitMQ, Out: w.Dir(), By: map[string]int{}}
	if o.has(SelectAtRisk) && !slices.Contains(o.Select, SelectAll) {
		rep.Versions = o.BrokerVersions
		if len(rep.Versions) == 0 {
			rep.Versions = ModeledVersions()
		}
	}
	if len(cfg.VHostDirs) == 0 {
		return nil, fmt.Errorf("salvage needs a RabbitMQ node or vhost dir")
	}
	for _, d := range cfg.VHostDirs {
		if err := exportVHost(ctx, cfg.Root, d, o, w, rep); err != nil {
			return rep, fmt.Errorf("%s: %w", scan.Rel(cfg.Root, d), err)
		}
	}
	return rep, nil
}

// exportVHost exports one vhost from the streaming scan: each file's
// records are selected and written while the scan hands the file over
// (rscan.VHostOptions.EachFile), so no more than one file's records are
// held; the messages of queue index files follow, one queue dir at a time.
func exportVHost(ctx context.Context, root, dir string, o Options, w *Writer, rep *Report) error {
	var exported map[[16]byte]bool // ids exported from an .rdq, when queue messages follow
	st := &lostState{dir: dir}
	started := false
	start := func(v *rscan.VHostScan) { // before the vhost's first message or note
		started = true
		if !v.RefsKnown && (o.has(SelectUnreferenced) || o.has(SelectLost) || o.has(SelectAtRisk)) {
			rep.Notes = append(rep.Notes, v.Dir+": no queue indexes: references unknown, lost/at-risk/unreferenced select nothing")
		}
		if v.Queues != nil && (o.has(SelectAll) || o.has(SelectLost)) {
			exported = map[[16]byte]bool{}
		}
	}
	v, err := rscan.ScanVHost(ctx, root, dir, rscan.VHostOptions{EachFile: func(v *rscan.VHostScan, f *rscan.FileScan) error {
		if !started {
			start(v)
		}
		return exportFile(ctx, o, w, rep, v, f, st, exported)
	}})
	if err != nil {
		return err
	}
	if !started {
		start(v)
	}
	for _, f := range v.Files {
		if f.Err != nil {
			rep.Unread = append(rep.Unread, fmt.Sprintf("%s: %v", f.Path, f.Err))
			rep.unreadFile(f.Path)
		}
	}
	if v.Queues != nil {
		for _, u := range v.Queues.Unreadable {
			rep.Unread = append(rep.Unread, fmt.Sprintf("%s: %v", scan.Rel(root, u.Path), u.Err))
			rep.unreadFile(scan.Rel(root, u.Path))
		}
	}
	if len(v.Lost) > 0 {
		// The queues of a missing id: its message-missing findings name them
		// (one name per reference, as the references do).
		queues := map[string][]string{}
		for _, f := range v.Findings {
			if _, ok := queues[f.MsgID]; !ok && f.Code == rscan.CodeMessageMissing {
				queues[f.MsgID], _ = f.Details["queues"].([]string)
			}
		}
		for _, id := range v.Lost {
			rep.Missing = append(rep.Missing, MissingRef{VHost: v.VHost, MsgID: id, Queues: queues[id]})
		}
	}
	qm, err := queueMessages(root, v, o, rep, exported)
	if err != nil {
		return err
	}
	for _, x := range qm {
		if err := addMessage(w, rep, x.m, x.body); err != nil {
			return err
		}
	}
	if len(qm) > 0 {
		rep.Notes = append(rep.Notes, queueNote(v.Dir, qm))
	}
	return nil
}

// exportFile selects and writes the records of one file the scan hands over.
func exportFile(ctx context.Context, o Options, w *Writer, rep *Report, v *rscan.VHostScan, f *rscan.FileScan,
	st *lostState, exported map[[16]byte]bool) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	atRisk, err := atRiskVictims(o, v, f)
	if err != nil {
		return err
	}
	after := afterCorruption(v, f)
	var data []byte
	for _, r := range f.Records {
		if r.Status == rscan.StatusDuplicate {
			continue
		}
		var sel []Selection
		var why []string
		add := func(s Selection, reason string) {
			if o.has(s) {
				sel = append(sel, s)
				why = append(why, reason)
			}
		}
		if o.has(SelectAll) {
			sel, why = append(sel, SelectAll), append(why, "all: a record of "+f.Path)
		}
		if o.has(SelectLost) {
			reason, err := st.lost(v, f, r)
			if err != nil {
				return err
			}
			if reason != "" {
				add(SelectLost, reason)
			}
		}
		if reason, ok := atRisk[r.Offset]; ok {
			add(SelectAtRisk, reason)
		}
		if r.Status == rscan.StatusUnreferenced {
			add(SelectUnreferenced, "unreferenced: no queue index references this msg id; the broker's compaction reclaims it")
		}
		if reason, ok := after[r.Offset]; ok {
			add(SelectAfterCorruption, reason)
		}
		if len(sel) == 0 {
			continue
		}
		if data == nil {
			if data, err = storefile.ReadFile(f.Abs); err != nil {
				return err
			}
		}
		if r.End() > int64(len(data)) || r.BadBody {
			rep.Skipped++
			continue
		}
		m, body, err := rabbitMessage(v, f, r, data[r.Offset:r.End()])
		if err != nil {
			rep.Skipped++
			rep.Notes = append(rep.Notes, fmt.Sprintf("%s@%d: %v", f.Path, r.Offset, err))
			continue
		}
		m.SelectedBy, m.Why = dedupSel(sel), why
		if err := addMessage(w, rep, m, body); err != nil {
			return err
		}
		if exported != nil {
			exported[r.MsgID] = true
		}
	}
	return nil
}

// addMessage writes one message and counts it.
func addMessage(w *Writer, rep *Report, m Message, body []byte) error {
	res, err := w.Put(m, body)
	if err != nil {
		return err
	}
	switch res {
	case PutFiltered:
		rep.Filtered++
		return nil
	case PutResumed:
		rep.Resumed++
	case PutWritten:
		rep.Written++
	}
	rep.Selected++
	rep.Bytes += int64(len(body))
	for _, s := range m.SelectedBy {
		rep.By[string(s)]++
	}
	return nil
}

func dedupSel(s []Selection) []Selection {
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	out := s[:0]
	for i, x := range s {
		if i == 0 || x != s[i-1] {
			out = append(out, x)
		}
	}
	return out
}

// rabbitMessage decodes one record frame into a Message and its payload.
func rabbitMessage(v *rscan.VHostScan, f *rscan.FileScan, r *rscan.Record, frame []byte) (Message, []byte, error) {
	dm, err := rfmt.DecodeMessage(frame[rfmt.RDQHeaderLen:len(frame)-1], r.Offset+rfmt.RDQHeaderLen)
	if err != nil {
		return Message{}, nil, err
	}
	m := Message{Store: StoreRabbitMQ, MsgID: r.ID(), Path: f.Path, Offset: r.Offset, RecordSize: r.TotalSize,
		VHost: v.VHost, Queues: r.ReferencedBy, Status: r.Status, Location: rscan.LocationSharedStore.String()}
	if f.Transient {
		m.Status += " (msg_store_transient)"
	}
	return fillDecoded(m, dm)
}

// lostState is what lost needs across the files of a vhost: the records
// of the one file an index entry last sent it to.
type lostState struct {
	dir     string // the vhost dir
	num     int64
	records map[int64]rscan.Record
	read    bool
}

// lost: after a clean shutdown the broker reads each message where
// msg_store_index.ets says; a referenced record whose id the index puts
// nowhere intact is unreadable to it. The reason, or "" when r is not lost.
func (st *lostState) lost(v *rscan.VHostScan, f *rscan.FileScan, r *rscan.Record) (string, error) {
	c := v.Clean
	if c == nil || !c.CleanDot || !c.HasIndex || !v.RefsKnown || f.Transient || r.Status != rscan.StatusReferenced {
		return "", nil
	}
	e := rscan.IndexEntry{File: r.File, Offset: r.Offset, TotalSize: r.TotalSize}
	intact := !r.BadBody
	switch r.IndexMatch {
	case "absent":
		return "lost: referenced by " + strings.Join(r.ReferencedBy, ", ") +
			" but msg_store_index.ets has no entry for it; a clean start cannot read it", nil
	case "mismatch":
		// The index puts the id elsewhere: lost unless an intact copy of
		// it lies there (a later duplicate, in this file or another).
		e = f.IndexEntries[r.Offset]
		if !st.read || st.num != e.File {
			recs, err := rscan.StoreRecords(st.dir, e.File)
			if err != nil {
				return "", err
			}
			st.num, st.records, st.read = e.File, recs, true
		}
		at, ok := st.records[e.Offset]
		intact = ok && !at.BadBody && at.MsgID == r.MsgID && at.TotalSize == e.TotalSize
	}
	if intact {
		return "", nil
	}
	return fmt.Sprintf("lost: referenced by %s but msg_store_index.ets points at %d.rdq@%d (%d bytes), where no intact copy lies; a clean start reads the wrong bytes",
		strings.Join(r.ReferencedBy, ", "), e.File, e.Offset, e.TotalSize), nil
}

// afterCorruption: in the current persistent file the broker's recovery
// cuts at the end of the last referenced record (dirty) or at the saved
// file size (clean); records past that cut with a bad region (a gap)
// between the cut and them are selected.
func afterCorruption(v *rscan.VHostScan, f *rscan.FileScan) map[int64]string {
	out := map[int64]string{}
	if !f.Current || f.Transient || !v.RefsKnown {
		return out
	}
	cut, how := f.LastReferencedEnd, "the end of its last referenced record (dirty recovery)"
	if c := v.Clean; c != nil && c.CleanDot && c.HasFileSummary {
		for _, s := range c.Summaries {
			if s.File == f.Number {
				cut, how = s.FileSize, "its saved file size in file_summary.ets (clean recovery)"
			}
		}
	}
	for _, r := range f.Records {
		if r.Offset < cut {
			continue
		}
		for _, g := range f.Gaps {
			if g.Offset >= cut && g.Offset < r.Offset {
				out[r.Offset] = fmt.Sprintf("after-corruption: lies after a %d-byte bad region at %d; the broker truncates %s at %d, %s",
					g.Length, g.Offset, filepath.Base(f.Path), cut, how)
				break
			}
		}
	}
	return out
}

// hazardCodes are the scanner-misread finding codes whose victims are at
// risk.
var hazardCodes = map[string]bool{rscan.CodeZeroHoleMisread: true, rscan.CodeOffByNine: true,
	rscan.CodeGen1Stop: true, rscan.CodeScannerCrash: true}

// atRiskVictims maps each referenced victim (by offset) of a misread in
// file f that bites one of o.BrokerVersions (severity above info in a scan
// for that version) to the reason.
func atRiskVictims(o Options, v *rscan.VHostScan, f *rscan.FileScan) (map[int64]string, error) {
	out := map[int64]string{}
	if !o.has(SelectAtRisk) || !v.RefsKnown || len(f.Hazards) == 0 {
		return out, nil
	}
	// Per version, f's hazard findings with that version's severities (no
	// second scan: a version changes nothing else).
	vers := o.BrokerVersions
	if len(vers) == 0 {
		vers = ModeledVersions()
	}
	for _, bv := range vers {
		// Every victim, not the few a finding names inline.
		err := f.EachHazardVictim(bv, func(hf *scan.Finding, vic rscan.Victim) {
			if !hazardCodes[hf.Code] || hf.Severity == scan.Info {
				return
			}
			if vic.Status != rscan.StatusReferenced && vic.Status != rscan.StatusUnknown {
				return
			}
			if _, ok := out[vic.Offset]; ok {
				return
			}
			out[vic.Offset] = fmt.Sprintf("at-risk: %s (%s, RabbitMQ %v) at %s@%d drops it; checked for %s",
				hf.Code, hf.Severity, hf.Details["versions"], hf.Path, hf.Offset, bv)
		})
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// unreadFile adds rel to rep.UnreadFiles once.
func (rep *Report) unreadFile(rel string) {
	if rel != "" && !slices.Contains(rep.UnreadFiles, rel) {
		rep.UnreadFiles = append(rep.UnreadFiles, rel)
	}
}

// noteUnread takes what an incomplete scan could not read: its errors
// (Unread) and the store files it names unread (UnreadFiles): an error
// finding of an unreadable file (storectl.file.unreadable and the store
// kinds' *.unreadable), a file without an end.
func (rep *Report) noteUnread(res *scan.Result) {
	if !res.Incomplete {
		return
	}
	rep.Unread = append(rep.Unread, res.Errors...)
	for _, f := range res.Findings {
		if f.Severity == scan.Error && (f.Code == scan.CodeUnreadable || strings.HasSuffix(f.Code, ".unreadable")) {
			rep.unreadFile(f.Path)
		}
	}
	for _, f := range res.Files {
		if f.End == "" {
			rep.unreadFile(f.Path)
		}
	}
}
