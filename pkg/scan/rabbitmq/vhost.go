package rabbitmq

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"github.com/storectl/storectl/internal/storefile"
	rfmt "github.com/storectl/storectl/pkg/format/rabbitmq"
	"github.com/storectl/storectl/pkg/scan"
)

// VHostOptions tune ScanVHost.
type VHostOptions struct {
	BrokerVersion string       // see Config.BrokerVersion
	Options       scan.Options // Records and Progress are honoured
	// join lets the scan spill its join of the references against the
	// records (joinspill.go): Scan sets it, verify (which reads the id
	// table afterwards) does not.
	join joinSpill
	// exactIndex makes the scan hold and join msg_store_index.ets entry
	// by entry from the start (clean_digest.go).
	exactIndex bool
	// partialQueues lets scan and verify go on past queue dirs that
	// cannot be read (VHostQueues.Unreadable: reported, their references
	// unknown). Without it such a dir is an error, as writers and salvage
	// must not act on references they do not know.
	partialQueues bool
	// dropVictims: the caller reads no released file's victim lists
	// (ScanVHost frees its scanner on return), so none is written to
	// the victims' temp file (scanner.dropVictims).
	dropVictims bool
	// EachFile, when set, is handed each .rdq file's result in file order (the persistent store's files, then the transient
	// store's): its records with their statuses and references, gaps and
	// hazards, while the scan still holds them. v is the result so far:
	// Dir, VHost, Queues and Clean are known, Findings are not, and Files
	// holds the persistent store's files once the transient store's come.
	// The scan then keeps none of them (the scan that Scan and Verify
	// run, the same findings), so memory stays flat in the store's
	// records. An error stops the scan and is ScanVHost's.
	EachFile func(v *VHostScan, f *FileScan) error
}

// ScanVHost scans one vhost dir (msg_store_persistent/, msg_store_transient/
// and queues/ inside it) with the streaming scan Scan and Verify run: each
// file's records with their status, gaps and misread hazards with their
// victims go to o.EachFile while the scan holds them; the result keeps the
// per-file summaries, hazards, findings, the ids found nowhere and the
// clean-shutdown state. Paths are relative to root. The error is for what
// stops the scan as a whole (bad version string, unreadable queues dir);
// per file I/O errors are in FileScan.Err and in the findings.
func ScanVHost(ctx context.Context, root, vhostDir string, o VHostOptions) (*VHostScan, error) {
	// The scanner is freed on return: nothing reads its id table after
	// the scan, so the join may spill (joinspill.go) on a store large
	// enough, as Scan's does.
	o.join.allow = true
	o.dropVictims = true
	v, s, err := scanVHostKeep(ctx, root, vhostDir, o)
	if s != nil {
		s.free()
	}
	return v, err
}

// QueuesOf returns the names of the queues that reference msg id (32 hex
// digits), one per reference, sorted. The scan keeps no map of them: the
// queue indexes are read again, which a planner does for the few ids it
// names. Nil when no queue references it or the references are unknown.
func (v *VHostScan) QueuesOf(id string) ([]string, error) {
	if v.Queues == nil {
		return nil, nil
	}
	want, ok := decodeID(id)
	if !ok {
		return nil, nil
	}
	var mu sync.Mutex
	n := map[*QueueDir]int{}
	q, err := ReadVHostQueuesRefsFunc(v.Queues.Dir, func(qd *QueueDir, refs []QueueRef) {
		for _, r := range refs {
			if r.ID == want {
				mu.Lock()
				n[qd]++
				mu.Unlock()
			}
		}
	})
	if err != nil {
		return nil, err
	}
	var out []string
	for _, qd := range q.Queues {
		for range n[qd] {
			out = append(out, queueName(qd))
		}
	}
	sort.Strings(out)
	return out, nil
}

// missing reports referenced ids that no .rdq holds.
func (s *scanner) missing(v *VHostScan) []scan.Finding {
	if v.Queues == nil {
		return nil
	}
	return s.missingLean(v)
}

func queueFindings(root string, q *VHostQueues) []scan.Finding {
	if q == nil {
		return nil
	}
	var out []scan.Finding
	for _, a := range q.AllAnomalies() {
		sev := scan.Warning
		if a.Code == CodeQSCRC {
			sev = scan.Error
		}
		out = append(out, scan.Finding{Code: a.Code, Severity: sev, Path: scan.Rel(root, a.Path),
			Offset: a.Offset, Repair: scan.RepairNone, Message: a.Err.Error()})
	}
	return out
}

func (s *scanner) layout(v *VHostScan) map[string]any {
	l := map[string]any{"vhost_dir": v.Dir, "vhost": v.VHost, "references_known": v.RefsKnown}
	var versions []string
	if s.termCnt[rfmt.RecordBasicMessage] > 0 {
		versions = append(versions, "3.x (basic_message)")
	}
	if s.termCnt[rfmt.RecordMC] > 0 {
		versions = append(versions, "3.13+/4.x (mc)")
	}
	l["versions"] = versions
	l["terms"] = map[string]int{"basic_message": s.termCnt[rfmt.RecordBasicMessage], "mc": s.termCnt[rfmt.RecordMC], "other": s.termCnt[""]}
	cq := map[string]bool{}
	if v.Queues != nil {
		for _, q := range v.Queues.Queues {
			ents, _ := storefile.ReadDir(q.Dir)
			for _, e := range ents {
				switch filepath.Ext(e.Name()) {
				case ".qi", ".qs":
					cq["v2"] = true
				case ".idx", ".jif":
					cq["v1"] = true
				}
			}
		}
	}
	l["cq_index"] = cq
	c := v.Clean
	l["clean_shutdown"] = map[string]bool{"clean.dot": c != nil && c.CleanDot,
		"file_summary.ets": c != nil && c.HasFileSummary, "msg_store_index.ets": c != nil && c.HasIndex}
	return l
}

// missingFinding reports that queue name references r's message, which
// no .rdq holds. The offset is the .qi slot (v2) or 0 for v1 records,
// whose byte position verify reports exactly.
// lastFoundSeq is the highest seq id of refs whose record was found (any:
// there is one): a missing record after it, after an unclean stop, is
// normally a publish never confirmed (QueueFate.unconfirmed).
func lastFoundSeq(refs []QueueRef, found func(QueueRef) bool) (last uint64, any bool) {
	for _, r := range refs {
		if found(r) && (!any || r.SeqID > last) {
			last, any = r.SeqID, true
		}
	}
	return last, any
}

// With unread .rdq files the message may be in one of them: the finding
// is message-unknown instead, naming them. tail says no later reference
// of the queue has its record (a crash loses a suffix of the writes).
func (s *scanner) missingFinding(r QueueRef, name string, queues []string, unread []string, tail bool) scan.Finding {
	off := int64(0)
	if r.Slot >= 0 {
		off = 64 + 32*int64(r.Slot)
	}
	f := scan.Finding{Code: CodeMessageMissing, Severity: scan.Error,
		Path: scan.Rel(s.root, r.Path), Offset: off, Repair: scan.RepairNone, MsgID: r.MsgID,
		Details: map[string]any{"queue": name, "queues": queues, "seq_id": r.SeqID},
		Message: fmt.Sprintf("queue %s references msg %s, which no .rdq file holds; the next start drops it", name, r.MsgID)}
	switch c := s.clean; {
	case len(unread) > 0:
		unknownFinding(&f, unread)
		f.Message = fmt.Sprintf("queue %s references msg %s, which no readable .rdq file holds; %s", name, r.MsgID, waitsOnText(unread))
	case tail && (c == nil || !c.CleanDot || !c.HasIndex || !c.HasFileSummary):
		// Unclean stop: normally a publish never confirmed (verify's
		// missingFindings says the same).
		f.Severity, f.Details["state"] = scan.Info, "unconfirmed"
		f.Message = fmt.Sprintf("queue %s references msg %s, which no .rdq file holds: after the unclean stop this is normally a publish that was never confirmed (its store write did not reach disk); the next start drops it", name, r.MsgID)
	default:
		f.Details["state"] = "lost"
	}
	return f
}

// unknownFinding turns a message-missing finding into message-unknown:
// the message may be in an .rdq that could not be read.
func unknownFinding(f *scan.Finding, unread []string) {
	f.Code, f.Severity = CodeMessageUnknown, scan.Warning
	f.Details["waits_on"] = unread
}

// waitsOnText says which unread files a message's fate waits on.
func waitsOnText(unread []string) string {
	const most = 5
	names := unread
	more := ""
	if len(names) > most {
		names, more = names[:most], fmt.Sprintf(" and %d more", len(unread)-most)
	}
	return fmt.Sprintf("it may be in %s%s, which could not be read: whether the next start keeps it is unknown, not lost", strings.Join(names, ", "), more)
}

// Unread lists the persistent-store .rdq files that could not be read in
// full (permission, I/O error, vanished, too large): a referenced message
// found in no other file may be in one of them.
func (v *VHostScan) Unread() []string {
	var out []string
	for _, f := range v.Files {
		if f.Err != nil && !f.Transient {
			out = append(out, f.Path)
		}
	}
	return out
}

// lostIDs is the sorted set of msg ids of message-missing findings
// (message-unknown ones are not lost).
func lostIDs(out []scan.Finding) []string {
	var ids []string
	seen := map[string]bool{}
	for _, f := range out {
		if f.Code == CodeMessageMissing && !seen[f.MsgID] {
			seen[f.MsgID] = true
			ids = append(ids, f.MsgID)
		}
	}
	sort.Strings(ids)
	return ids
}

// QueueUnread lists the queue index files (or dirs) of v that could not
// be read: what their queues reference is unknown.
func (v *VHostScan) QueueUnread() []string {
	if v.Queues == nil {
		return nil
	}
	var out []string
	for _, u := range v.Queues.Unreadable {
		out = append(out, u.Path)
	}
	return out
}

// unreadQueueFindings reports each queue dir that could not be read
// (error) and, since any record might be one of its references, turns
// every unreferenced finding into one that says so and waits on it.
func unreadQueueFindings(root string, v *VHostScan) []scan.Finding {
	if v.Queues == nil || len(v.Queues.Unreadable) == 0 {
		return nil
	}
	var waits []string
	var out []scan.Finding
	for _, u := range v.Queues.Unreadable {
		rel := scan.Rel(root, u.Path)
		waits = append(waits, rel)
		out = append(out, scan.Finding{Code: CodeQueueUnreadable, Severity: scan.Error, Path: rel, Repair: scan.RepairNone,
			Details: map[string]any{"queue_dir": filepath.Base(u.Dir), "error": u.Err.Error()},
			Message: fmt.Sprintf("queue index of %s could not be read (%v): its entries, and which records it references, are unknown", filepath.Base(u.Dir), errText(u.Err))})
	}
	v.unrefUnknown = 0
	for i := range v.Findings {
		if f := &v.Findings[i]; f.Code == CodeUnreferenced {
			n, _ := f.Details["records"].(int)
			v.unrefUnknown += n
			f.Message = fmt.Sprintf("%d record(s) no readable queue index references; ", n) + strings.Join(waits, ", ") + " could not be read, so whether they are referenced is unknown"
			if f.Details == nil {
				f.Details = map[string]any{}
			}
			f.Details["waits_on"] = waits
		}
	}
	return out
}

// errText is err without the path a *fs.PathError repeats.
func errText(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}

// unreadQueueFates are the queue lines of v's queue dirs that could not
// be read: nothing is known of their entries; unknown counts the records
// no readable queue references, which may be theirs.
func unreadQueueFates(root string, v *VHostScan) []*QueueFate {
	if v.Queues == nil || len(v.Queues.Unreadable) == 0 {
		return nil
	}
	unref := v.unrefUnknown
	var out []*QueueFate
	for _, u := range v.Queues.Unreadable {
		qf := &QueueFate{Queue: scan.Queue{VHost: v.VHost, Dir: filepath.Base(u.Dir), Index: indexKind(u.Dir),
			AtRisk: map[string]int{}, Unknown: unref, WaitsOn: []string{scan.Rel(root, u.Path)}}, Path: u.Dir}
		for _, k := range atRiskKeys {
			qf.AtRisk[k] = 0
		}
		if b, err := storefile.ReadFile(filepath.Join(u.Dir, ".queue_name")); err == nil {
			if n, err := rfmt.ParseQueueName(b); err == nil {
				qf.Queue.Queue = n.Name
			}
		}
		out = append(out, qf)
	}
	return out
}

// unreadErrs are the errors that make a scan of v incomplete: its queue
// dirs that could not be read.
func unreadErrs(root string, v *VHostScan) []error {
	if v.Queues == nil {
		return nil
	}
	var out []error
	for _, u := range v.Queues.Unreadable {
		out = append(out, fmt.Errorf("%s: %w", scan.Rel(root, u.Path), u.Err))
	}
	return out
}
