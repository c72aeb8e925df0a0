package salvage

import (
	"context"
	"encoding/hex"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/storectl/storectl/pkg/scan"
	qscan "github.com/storectl/storectl/pkg/scan/quorum"
)

// LocationQuorum is the Location of a quorum queue message: Path is the
// WAL or segment holding its enqueue entry (Offset the WAL record, or the
// entry's data in a segment), RaIndex and RaTerm the entry's place in the
// queue's Raft log.
const LocationQuorum = "quorum"

// DamagedEntry is a live message whose log entry fails its checksum or
// CRC: some of its bytes are not what was published (the entry ra's
// reader refuses, so the queue cannot start).
type DamagedEntry struct {
	VHost     string `json:"vhost,omitempty"`
	Queue     string `json:"queue"`
	UID       string `json:"uid"`
	Index     uint64 `json:"raft_index"`
	Path      string `json:"path"`
	Offset    int64  `json:"offset"`
	Length    int64  `json:"length"`
	MessageID string `json:"message_id,omitempty"`
	Exported  bool   `json:"exported"` // --select crc-damaged: written, flagged crc_match false
	Why       string `json:"why"`
}

// ExportQuorum exports the messages of the quorum queues of cfg into w
// (rep: the report to add to; nil makes one). The messages are those the
// queue's next start holds, replayed from its snapshot and log as verify
// does (pkg/scan/quorum), in the order the replay models the next start
// delivering them (messages the start returns from consumers by consumer
// and msg id: the broker returns them in the order of its map of them, so
// that part of the order differs), each with the body, exchange,
// routing keys and properties of its enqueue entry. A queue the broker
// cannot start (its WAL refused, or an entry of its log failing its CRC)
// is exported all the same: every message whose entry is intact.
// Selections: all (every intact live message), lost (the live messages
// of a queue whose next start fails: the broker cannot deliver them until
// it is repaired), crc-damaged (the live messages whose entry fails its
// CRC or checksum, exported as they decode, flagged crc_match false). A
// damaged entry that is not exported is named in rep.Damaged, a live
// message whose entry is not on disk in rep.Missing.
func ExportQuorum(ctx context.Context, cfg qscan.Config, o Options, w *Writer, rep *Report) (*Report, error) {
	if rep == nil {
		rep = &Report{Store: StoreRabbitMQ, Out: w.Dir(), By: map[string]int{}}
	}
	cfg.Replay = true
	res, err := qscan.Scan(ctx, cfg, scan.Options{})
	if err != nil {
		return rep, err
	}
	rep.noteUnread(res.Result)
	want := func(s Selection) bool {
		return slices.Contains(o.Select, s) || s != SelectCRCDamaged && slices.Contains(o.Select, SelectAll)
	}
	er := &qscan.EntryReader{}
	defer er.Close()
	for _, sys := range res.Systems {
		if sys.System != qscan.SystemQuorum {
			continue // coordination: stream coordinator and khepri, no messages
		}
		reps := append([]*qscan.Replica(nil), sys.Replicas...)
		sort.Slice(reps, func(i, j int) bool {
			return reps[i].Name() < reps[j].Name() || reps[i].Name() == reps[j].Name() && reps[i].UID < reps[j].UID
		})
		for _, r := range reps {
			p := r.Prediction()
			if p == nil {
				continue
			}
			q := p.Queue
			if q.NextStart.State == qscan.StartNotRead {
				rep.Notes = append(rep.Notes, fmt.Sprintf("%s (%s): the log could not be replayed (%s); its live messages are not known", q.Queue, r.Rel, q.NextStart.Reason))
			}
			down := q.NextStart.State != qscan.StartOK && q.NextStart.State != qscan.StartNotRead
			for lm := range p.Live() {
				if err := ctx.Err(); err != nil {
					return rep, err
				}
				if err := exportLive(er, w, rep, r, q, lm, down, want); err != nil {
					return rep, err
				}
			}
			if err := p.LiveErr(); err != nil {
				return rep, fmt.Errorf("%s (%s): not every live message could be read: %w", q.Queue, r.Rel, err)
			}
		}
	}
	if res.Incomplete {
		// An entry "in no WAL or segment" may be in the file that could not
		// be read: not known to be gone.
		for i := range rep.Missing {
			if strings.HasSuffix(rep.Missing[i].Why, "is in no WAL or segment on disk") {
				rep.Missing[i].Why += " that could be read (see unread): unknown, not lost"
			}
		}
	}
	slices.Sort(rep.Notes)
	return rep, nil
}

// exportLive exports one live message of queue q.
func exportLive(er *qscan.EntryReader, w *Writer, rep *Report, r *qscan.Replica, q qscan.Queue, lm qscan.LiveMsg,
	down bool, want func(Selection) bool) error {
	if lm.Loc == nil {
		rep.Missing = append(rep.Missing, MissingRef{VHost: q.VHost, Queues: []string{q.Queue},
			MsgID: fmt.Sprintf("%s:%d", q.UID, lm.Index),
			Why:   fmt.Sprintf("raft index %d of %s is live at the next start, but its enqueue entry is in no WAL or segment on disk", lm.Index, q.Queue)})
		return nil
	}
	loc := lm.Loc
	var sel []Selection
	var why []string
	add := func(s Selection, reason string) {
		if want(s) {
			sel, why = append(sel, s), append(why, reason)
		}
	}
	if lm.Damaged {
		d := DamagedEntry{VHost: q.VHost, Queue: q.Queue, UID: q.UID, Index: lm.Index, Path: loc.Rel, Offset: loc.Offset,
			Length: int64(loc.Length), MessageID: lm.MessageID,
			Why: fmt.Sprintf("entry %d of %s at %s@%d (%d bytes) fails its %s: some bytes are not what was published", lm.Index, q.Queue, loc.Rel, loc.Offset, loc.Length, checkName(loc))}
		add(SelectCRCDamaged, "crc-damaged: "+d.Why)
		d.Exported = len(sel) > 0
		if !d.Exported {
			d.Why += "; not exported (--select crc-damaged exports it, flagged)"
		}
		rep.Damaged = append(rep.Damaged, d)
		if !d.Exported {
			return nil
		}
	} else {
		add(SelectAll, "all: live in "+q.Queue+" at the next start (raft index "+fmt.Sprint(lm.Index)+")")
	}
	if down {
		add(SelectLost, fmt.Sprintf("lost: %s does not start (%s: %s); the broker cannot deliver it until the queue is repaired", q.Queue, q.NextStart.State, q.NextStart.Reason))
	}
	if len(sel) == 0 {
		return nil
	}
	b, err := er.Read(loc)
	if err != nil {
		return fmt.Errorf("%s@%d: %w", loc.Rel, loc.Offset, err)
	}
	em, ok, err := qscan.EnqueueOf(b, loc.Offset)
	if !ok || err != nil {
		if err == nil {
			err = fmt.Errorf("raft index %d is no enqueue", lm.Index)
		}
		rep.Skipped++
		rep.Notes = append(rep.Notes, fmt.Sprintf("%s@%d (%s, raft index %d): %v", loc.Rel, loc.Offset, q.Queue, lm.Index, err))
		return nil
	}
	idx, term, crc := lm.Index, loc.Term, loc.OK
	m := Message{Store: StoreRabbitMQ, Path: loc.Rel, Offset: loc.Offset, RecordSize: int64(loc.Length),
		Location: LocationQuorum, VHost: q.VHost, Queues: []string{q.Queue}, Status: "live at the next start",
		QueueType: qscan.QueueType, UID: q.UID, RaIndex: &idx, RaTerm: &term, CRCMatch: &crc, Redelivered: lm.Returned}
	if loc.InWAL {
		m.Offset, m.RecordSize = loc.Record, loc.RecSize
	}
	if len(em.ID) > 0 {
		m.MsgID = hex.EncodeToString(em.ID)
	} else {
		m.MsgID = fmt.Sprintf("%s-%d", q.UID, lm.Index)
	}
	if down {
		m.Status = "on disk; the queue does not start (" + q.NextStart.State + ")"
	}
	if lm.Returned {
		why = append(why, "delivered and not settled in the log: the next start returns it to the queue (redelivered)")
	}
	m, body, err := fillDecoded(m, em.Message)
	if err != nil {
		rep.Skipped++
		rep.Notes = append(rep.Notes, fmt.Sprintf("%s@%d (%s, raft index %d): %v", loc.Rel, loc.Offset, q.Queue, lm.Index, err))
		return nil
	}
	m.SelectedBy, m.Why = dedupSel(sel), why
	return addMessage(w, rep, m, body)
}

func checkName(loc *qscan.EntryLoc) string {
	if loc.InWAL {
		return "WAL record checksum (Adler-32)"
	}
	return "segment entry CRC-32"
}
