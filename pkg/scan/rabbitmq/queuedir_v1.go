package rabbitmq

// v1 part of ReadQueueDir: <S>.idx segments, then journal.jif on top
// (rabbit_queue_index:recover_journal/1, scan_queue_segments/4).

import (
	"fmt"
	"path/filepath"
	"sort"
	"strconv"

	rfmt "github.com/storectl/storectl/pkg/format/rabbitmq"

	"github.com/storectl/storectl/pkg/format"
)

func (q *QueueDir) readV1(idx []uint64, hasJournal bool, segCount int) ([]QueueEntry, error) {
	sort.Slice(idx, func(i, j int) bool { return idx[i] < idx[j] })
	r := newIDXReplayer(segCount)
	for _, seg := range idx {
		name := strconv.FormatUint(seg, 10) + ".idx"
		path := filepath.Join(q.Dir, name)
		b, ok, err := q.read(name)
		if err != nil {
			return nil, err
		}
		if !ok {
			continue
		}
		if rfmt.IDXAllZero(b) {
			q.anomaly(path, format.Corrupt(0, "segment", fmt.Errorf("%w: only zero bytes (the broker deletes it)", format.ErrInvalid)), CodeIDXAllZero)
			continue
		}
		recs, err := rfmt.ReadIDX(b)
		if err != nil {
			q.anomaly(path, err, CodeIDXBadRecord)
		}
		r.segment(seg, path, recs)
	}
	if hasJournal {
		path := filepath.Join(q.Dir, "journal.jif")
		b, ok, err := q.read("journal.jif")
		if err != nil {
			return nil, err
		}
		if ok {
			j, err := rfmt.ReadJournal(b)
			if err != nil {
				q.anomaly(path, err, CodeJournalTail)
			}
			r.journal(path, j.Records)
		}
	}
	for _, a := range r.anomalies {
		q.anomaly(a.Path, a.Err, a.Code)
	}
	var out []QueueEntry
	for _, l := range r.live() {
		p := l.pub
		e := QueueEntry{SeqID: l.seq, ID: p.msgID, HasID: true, Persistent: p.persistent,
			Size: p.size, Expiry: p.expiry, Delivered: l.delivered, IndexVersion: 1,
			Path: p.path, Offset: p.offset}
		if q.hexIDs() {
			e.MsgID = queuedirHex(p.msgID)
		}
		if len(p.embedded) > 0 {
			e.Location, e.Body = LocationEmbedded, p.embedded
		} else {
			e.Location = LocationSharedStore
			if p.persistent {
				q.Refs = append(q.Refs, QueueRef{Path: p.path, Slot: -1, SeqID: l.seq, MsgID: e.MsgID, ID: p.msgID})
			}
		}
		if !p.persistent {
			e.Drop = DropTransient
		}
		if !q.refsOnly { // references only: no entry is kept
			out = append(out, e)
		}
	}
	return out, nil
}
