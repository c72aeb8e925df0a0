package rabbitmq

// Queue-side findings of verify: entries whose message is missing (§6
// invariant 10), the queue index readers' anomalies at their exact file
// and offset (invariants 14-16), orphan queue dirs (17), and the layout.

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/storectl/storectl/pkg/format"
	rfmt "github.com/storectl/storectl/pkg/format/rabbitmq"
	"github.com/storectl/storectl/pkg/scan"
)

// entryLength is the bytes of an index entry: a v2 slot is 32 bytes; a v1
// publish record's length is not kept by the reader (0: a point).
func entryLength(e QueueEntry) int64 {
	if e.IndexVersion == 2 {
		return rfmt.QIEntrySize
	}
	return 0
}

// missingFindings reports every persistent shared-store entry whose
// message has no valid record: which queue loses which message, at the
// index entry that references it.
func missingFindings(root string, qs []*QueueFate, refs map[string][]string, clean bool) []scan.Finding {
	var out []scan.Finding
	for _, q := range qs {
		for _, ef := range q.Entries {
			e := ef.Entry
			if e.Location != LocationSharedStore || !e.Persistent || q.OrphanWhy != "" {
				continue
			}
			var what string
			switch {
			case ef.Unknown:
				f := scan.Finding{Code: CodeMessageMissing, Path: scan.Rel(root, e.Path),
					Offset: e.Offset, Length: entryLength(e), MsgID: e.MsgID, Repair: scan.RepairNone,
					Details: map[string]any{"queue": q.Queue.Queue, "queue_dir": q.Dir, "seq_id": e.SeqID,
						"index_version": e.IndexVersion, "queues": refs[e.MsgID]},
					Message: fmt.Sprintf("queue %s holds msg %s (seq %d), which no readable .rdq file holds; %s",
						q.Queue.Queue, e.MsgID, e.SeqID, waitsOnText(q.Queue.WaitsOn))}
				unknownFinding(&f, q.Queue.WaitsOn)
				out = append(out, f)
				continue
			case ef.Record == nil:
				what = "which no .rdq file holds"
			case ef.Record.BadBody:
				what = fmt.Sprintf("whose record at %s@%d has a body that is not an ETF term", ef.Record.Path, ef.Record.Offset)
			default:
				continue
			}
			when := "the next start drops it"
			sev, state := scan.Error, "lost"
			switch {
			case clean:
				when = "after the clean start, reading it fails and the queue crashes"
			case ef.Record == nil && q.unconfirmed(e.SeqID):
				// After an unclean stop an index entry whose store write
				// never reached disk is a publish that was never confirmed
				// (a confirm waits for the store's fsync): the broker drops
				// it and never promised it. Lost is for what was on disk
				// or confirmed durable.
				sev, state = scan.Info, "unconfirmed"
				when = "after the unclean stop this is normally a publish that was never confirmed (its store write did not reach disk); the next start drops it"
			case ef.Record == nil:
				when = fmt.Sprintf("a later message of the queue (seq %d) is on disk, so this one was written too and is gone: the next start drops it", q.LastFound)
			}
			f := scan.Finding{Code: CodeMessageMissing, Severity: sev, Path: scan.Rel(root, e.Path),
				Offset: e.Offset, Length: entryLength(e), MsgID: e.MsgID, Repair: scan.RepairNone,
				Details: map[string]any{"queue": q.Queue.Queue, "queue_dir": q.Dir, "seq_id": e.SeqID,
					"index_version": e.IndexVersion, "queues": refs[e.MsgID], "state": state},
				Message: fmt.Sprintf("queue %s holds msg %s (seq %d), %s: %s", q.Queue.Queue, e.MsgID, e.SeqID, what, when)}
			out = append(out, f)
		}
	}
	return out
}

// anomalyFindings turns the queue index readers' anomalies into findings.
// A .qs CRC failure is placed at the start of its entry (the reader
// reports the crc16 field) and names the .qi entry that points at it.
func anomalyFindings(root string, vq *VHostQueues, qs []*QueueFate) []scan.Finding {
	if vq == nil {
		return nil
	}
	byStore := map[string][]*EntryFate{}
	for _, q := range qs {
		for i := range q.Entries {
			if e := &q.Entries[i]; e.Entry.Location == LocationQueueStore {
				byStore[e.Entry.StorePath] = append(byStore[e.Entry.StorePath], e)
			}
		}
	}
	var out []scan.Finding
	for _, a := range vq.AllAnomalies() {
		rel := scan.Rel(root, a.Path)
		f := scan.Finding{Code: a.Code, Severity: anomalySeverity(a.Code), Path: rel,
			Offset: a.Offset, Repair: scan.RepairNone, Message: strings.ReplaceAll(a.Err.Error(), a.Path, rel)}
		var ce *format.CorruptError
		if errors.As(a.Err, &ce) && ce.Field != "" {
			f.Evidence = map[string]string{ce.Field: "fail"}
		}
		for _, ef := range byStore[a.Path] {
			e := ef.Entry
			if a.Offset < int64(e.StoreOffset) || a.Offset >= int64(e.StoreOffset)+rfmt.QSEntryHeaderSize {
				continue
			}
			f.Offset, f.Length, f.MsgID = int64(e.StoreOffset), rfmt.QSEntryHeaderSize+int64(e.StoreSize), ef.MsgID
			f.Details = map[string]any{"qi": scan.Rel(root, e.Path), "qi_offset": e.Offset, "seq_id": e.SeqID,
				"field_offset": a.Offset, "dropped_at_dirty_start": e.Drop}
			break
		}
		out = append(out, f)
	}
	return out
}

// anomalySeverity: errors where a message is lost (bad .qs entry, a .qi
// header the broker deletes with its .qs), warnings otherwise.
func anomalySeverity(code string) scan.Severity {
	switch code {
	case CodeQSCRC, CodeQSBadEntry, CodeQIBadHeader:
		return scan.Error
	}
	return scan.Warning
}

// orphanFindings reports queue dirs no durable queue can own.
func orphanFindings(root string, qs []*QueueFate) []scan.Finding {
	var out []scan.Finding
	for _, q := range qs {
		if q.OrphanWhy == "" {
			continue
		}
		out = append(out, scan.Finding{Code: CodeQueueOrphan, Severity: scan.Warning, Path: scan.Rel(root, q.Path),
			Repair: scan.RepairNone, Details: map[string]any{"entries": q.Queue.Entries, "reason": q.OrphanWhy},
			Message: fmt.Sprintf("queue dir %s: %s; the broker deletes dirs of unknown queues at start, with their %d entries",
				q.Dir, q.OrphanWhy, q.Queue.Entries)})
	}
	return out
}

// verifyLayout adds the shutdown state and the index versions to the
// scan's layout.
// kinds are the queues' index kinds (scan.Queue.Index), nq their count.
func verifyLayout(v *VHostScan, vv *VHostVerify, vhostDir string, kinds map[string]bool, nq int) map[string]any {
	l := map[string]any{}
	for k, x := range v.Layout {
		l[k] = x
	}
	sd := map[string]any{"state": vv.State, "from": vv.StateFrom}
	if vv.ClientRefs >= 0 {
		sd["client_refs"] = vv.ClientRefs
	}
	if st, err := os.Stat(filepath.Join(vhostDir, "recovery.dets")); err == nil {
		sd["recovery.dets"] = fmt.Sprintf("present, %d bytes; opaque (DETS is not read): whether client_refs "+
			"equals every durable queue's persistent_ref, and which queues have recovery terms, is not checked", st.Size())
	} else {
		sd["recovery.dets"] = "absent"
	}
	l["shutdown"] = sd
	switch {
	case kinds["v1+v2"] || (kinds["v1"] && kinds["v2"]):
		l["cq_index"] = "v1+v2"
	case kinds["v1"]:
		l["cq_index"] = "v1"
	case kinds["v2"]:
		l["cq_index"] = "v2"
	default:
		l["cq_index"] = "none"
	}
	l["queues"] = nq
	return l
}
