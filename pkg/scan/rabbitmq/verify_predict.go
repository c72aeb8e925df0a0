package rabbitmq

// The prediction of the next start, per queue (§1.3, §4.3, §5, §7b).
//
// Clean start (clean.dot + both .ets usable): the queues recover from
// their recovery terms without re-reading segments, so every persistent
// entry is kept; transient ones never survive a restart. Unclean start:
// rabbit_classic_queue_index_v2:recover/7 drops transient entries (D),
// shared-store entries whose message the store scan does not find (A),
// bad .qs entries (B) and location-0 or malformed ones (C). The store scan
// is storectl's (what a correct scanner finds); with --broker-version the
// records that version's scanner loses during a dirty recovery are
// dropped too. Queue dirs no durable queue can own are deleted whole.

import (
	"path/filepath"

	"github.com/storectl/storectl/internal/storefile"
	rfmt "github.com/storectl/storectl/pkg/format/rabbitmq"
	"github.com/storectl/storectl/pkg/scan"
)

// unreadRecord is what an unreadLookup returns for an id no readable
// .rdq holds while some .rdq could not be read: fate makes it Unknown.
var unreadRecord = &Record{}

// unreadLookup is lookup answering unreadRecord instead of nil when
// unread files could hold what it does not find.
func unreadLookup(lookup func([16]byte) *Record, unread []string) func([16]byte) *Record {
	if len(unread) == 0 {
		return lookup
	}
	return func(id [16]byte) *Record {
		if r := lookup(id); r != nil {
			return r
		}
		return unreadRecord
	}
}

// waitsOn names, on a queue with unknown entries, the files they wait on.
func (qf *QueueFate) waitsOn(unread []string) {
	if qf.Unknown > 0 {
		qf.Queue.WaitsOn = unread
	}
}

// predictQueue builds the QueueFate of one queue dir: lookup returns the
// referenced shared-store record holding an id (nil when none). Entries
// holds the fates keep accepts (every one when keep is nil); the counts
// and id lists cover all of them.
func predictQueue(qd *QueueDir, vhost string, clean bool, lookup func([16]byte) *Record, vic *victimIDs,
	keep func(EntryFate) bool) *QueueFate {
	qf := startQueueFate(qd, vhost, keep == nil, len(qd.Entries))
	qf.add(qd.Entries, clean, lookup, vic, keep)
	qf.end()
	return qf
}

// startQueueFate is a queue's fate before its entries are decided; all
// keeps every entry (n of them) rather than those keep selects.
func startQueueFate(qd *QueueDir, vhost string, all bool, n int) *QueueFate {
	qf := &QueueFate{Queue: scan.Queue{VHost: vhost, Dir: qd.Hash, Index: indexKind(qd.Dir),
		AtRisk: map[string]int{}, AtRiskMsgIDs: map[string]scan.MsgIDs{}}, Path: qd.Dir}
	if qd.HasName {
		qf.Queue.Queue = qd.Name.Name
	}
	for _, k := range atRiskKeys {
		qf.AtRisk[k] = 0
	}
	qf.OrphanWhy = orphanReason(qd, vhost)
	if n > 0 && all {
		qf.Entries = make([]EntryFate, 0, n)
	}
	return qf
}

// InlineQueueIDs is how many ids a queue line's drop_msg_ids and each of
// its at_risk_msg_ids lists name (the first ones, in seq order); drop and
// at_risk count them all. The dropped messages whose record is missing
// are message-missing findings, the at-risk ones record lines (--records)
// with a lost_by, so a line's size does not grow with its queue.
const InlineQueueIDs = 3

// add decides entries (the next ones of the queue, in seq order).
func (qf *QueueFate) add(entries []QueueEntry, clean bool, lookup func([16]byte) *Record, vic *victimIDs,
	keep func(EntryFate) bool) {
	for _, e := range entries {
		ef, id, idOK := fate(e, qf.OrphanWhy != "", clean, lookup, vic)
		if keep == nil || keep(ef) {
			if ef.MsgID == "" && e.HasID { // kept: its findings name the id
				ef.MsgID = hexID(id)
				ef.Entry.MsgID = ef.MsgID
			}
			qf.Entries = append(qf.Entries, ef)
		}
		qf.Queue.Entries++
		if ef.Unknown {
			qf.Unknown++
			continue
		}
		if ef.Record != nil && e.Persistent && e.Location == LocationSharedStore {
			qf.LastFound, qf.FoundAny, qf.pending = e.SeqID, true, 0
		}
		if !ef.Keep {
			qf.Drop++
			if ef.Reason == DropMissing {
				qf.pending++ // only an unclean start drops for a missing record
			}
			if idOK && qf.DropMsgIDs.Len() < InlineQueueIDs {
				qf.DropMsgIDs.Append(id)
			}
			continue
		}
		qf.Keep++
		if e.Location != LocationSharedStore || !idOK {
			continue
		}
		risk := vic.risk(id)
		for i, k := range atRiskKeys {
			if risk&(1<<i) != 0 {
				qf.AtRisk[k]++
				if ids := qf.AtRiskMsgIDs[k]; ids.Len() < InlineQueueIDs {
					ids.Append(id)
					qf.AtRiskMsgIDs[k] = ids
				}
			}
		}
	}
}

// end finishes a fate once every entry was added.
func (qf *QueueFate) end() {
	qf.Unconfirmed = qf.pending
	if len(qf.AtRiskMsgIDs) == 0 {
		qf.AtRiskMsgIDs = nil
	}
}

// fate decides one entry. id is the entry's msg id as bytes when idOK
// (the lookup, the hazards' lost ids and add's id lists want them). An
// index id comes as bytes (e.HasID) and its hex is left to add, for the
// entries it keeps: a queue's other entries make no string.
func fate(e QueueEntry, orphan, clean bool, lookup func([16]byte) *Record, vic *victimIDs) (ef EntryFate, id [16]byte, idOK bool) {
	ef = EntryFate{Entry: e, Keep: true}
	own := e.HasID || e.MsgID != "" // the entry's own id, not one from a body
	if e.HasID {
		id, idOK = e.ID, true
		ef.MsgID = e.MsgID
	} else {
		ef.MsgID = entryMsgID(e)
		id, idOK = decodeID(ef.MsgID)
	}
	shared := e.Location == LocationSharedStore
	if shared && idOK {
		vic.entry(id) // a spilled verify's answers for the id (verify_spill.go)
	}
	// The store is looked up by the entry's own id, not one from a body.
	unknown := false
	if shared && idOK && own {
		if ef.Record = lookup(id); ef.Record == unreadRecord {
			ef.Record, unknown = nil, true
		}
	}
	drop := func(reason string) (EntryFate, [16]byte, bool) {
		ef.Keep, ef.Reason = false, reason
		return ef, id, idOK
	}
	switch {
	case orphan:
		return drop(DropOrphanDir)
	case !e.Persistent:
		return drop(DropTransient)
	case unknown:
		ef.Keep, ef.Unknown = false, true
		return ef, id, idOK
	case clean:
		return ef, id, idOK
	case e.Drop != "":
		return drop(e.Drop)
	case shared && ef.Record == nil:
		return drop(DropMissing)
	case shared:
		// ef.Record is set, so id is e.MsgID's bytes.
		if code := vic.lostBy(id); code != "" {
			return drop(DropScanner + code)
		}
	}
	return ef, id, idOK
}

// askedID is the id fate asks the lookup and the victims about for e
// (vic.entry): a shared-store entry's id, its own or one from its body.
func askedID(e QueueEntry) (id [16]byte, ok bool) {
	if e.Location != LocationSharedStore {
		return id, false
	}
	if e.HasID {
		return e.ID, true
	}
	return decodeID(entryMsgID(e))
}

// entryMsgID is the entry's store msg id, or for a .qs or embedded
// message the id inside its body; "" when unknown.
func entryMsgID(e QueueEntry) string {
	if e.MsgID != "" || len(e.Body) == 0 {
		return e.MsgID
	}
	m, err := rfmt.DecodeMessage(rfmt.TrimQSPadding(e.Body), 0)
	if err != nil || len(m.ID) != 16 {
		return ""
	}
	return hexID([16]byte(m.ID))
}

// orphanReason says why no durable queue can own the dir; "" when one can.
// The broker deletes such dirs at start (rabbit_queue_index:start/2). The
// metadata store is not read, so a dir whose .queue_name is consistent is
// assumed to belong to a durable queue.
func orphanReason(qd *QueueDir, vhost string) string {
	switch {
	case !qd.HasName:
		return "no readable .queue_name (every queue writes one when it creates its dir)"
	case rfmt.QueueDirName(qd.Name.VHost, qd.Name.Name) != qd.Hash:
		return ".queue_name names queue " + qd.Name.Name + " of vhost " + qd.Name.VHost + ", which hashes to " +
			rfmt.QueueDirName(qd.Name.VHost, qd.Name.Name)
	case vhost != "" && qd.Name.VHost != vhost:
		return ".queue_name names vhost " + qd.Name.VHost + ", this is vhost " + vhost
	}
	return ""
}

// indexKind says which index versions the dir holds files of.
func indexKind(dir string) string {
	ents, _ := storefile.ReadDir(dir)
	v1, v2 := false, false
	for _, e := range ents {
		switch filepath.Ext(e.Name()) {
		case ".qi", ".qs":
			v2 = true
		case ".idx", ".jif":
			v1 = true
		}
	}
	switch {
	case v1 && v2:
		return "v1+v2"
	case v1:
		return "v1"
	case v2:
		return "v2"
	}
	return "none"
}
