package rabbitmq

// Replay of a v1 queue index: segments first, then the journal on top, as
// rabbit_queue_index:recover_journal/1 + segment_entries_foldr/3 combine
// them (load_segment, journal_minus_segment, segment_plus_journal).
// Acked entries are kept as tombstones while replaying so that journal
// records duplicating what a segment already holds (a flush interrupted
// before the journal was truncated) are no-ops, as in journal_minus_segment.

import (
	"fmt"
	"sort"

	rfmt "github.com/storectl/storectl/pkg/format/rabbitmq"

	"github.com/storectl/storectl/pkg/format"
)

// idxPub is a v1 publish, from a segment or the journal.
type idxPub struct {
	persistent bool
	msgID      [16]byte
	expiry     uint64
	size       uint32
	embedded   []byte
	path       string
	offset     int64
}

type idxSlot struct {
	pub       *idxPub
	del, ack  bool
	delOffset int64
}

// idxReplayer accumulates v1 index state keyed by absolute seq id.
type idxReplayer struct {
	segCount  uint64
	slots     map[uint64]*idxSlot
	anomalies []IndexAnomaly
}

func newIDXReplayer(segCount int) *idxReplayer {
	return &idxReplayer{segCount: uint64(segCount), slots: map[uint64]*idxSlot{}}
}

func (r *idxReplayer) anomaly(path string, off int64, code string, err error) {
	r.anomalies = append(r.anomalies, IndexAnomaly{Path: path, Offset: off, Code: code, Err: err})
}

// segment applies the records of segment seg in file order
// (parse_segment_entries with KeepAcked = true).
func (r *idxReplayer) segment(seg uint64, path string, recs []rfmt.IDXRecord) {
	for _, rec := range recs {
		if uint64(rec.RelSeq) >= r.segCount {
			r.anomaly(path, rec.Offset, CodeIDXBadRecord,
				format.Corrupt(rec.Offset, "relSeq", fmt.Errorf("%w: %d >= segment entry count %d",
					format.ErrInvalid, rec.RelSeq, r.segCount)))
			continue
		}
		seq := seg*r.segCount + uint64(rec.RelSeq)
		s := r.slots[seq]
		switch rec.Kind {
		case rfmt.IDXPublish:
			r.slots[seq] = &idxSlot{pub: &idxPub{rec.Persistent, rec.MsgID, rec.Expiry,
				rec.Size, rec.Embedded, path, rec.Offset}}
		case rfmt.IDXDelAck:
			switch {
			case s == nil || s.pub == nil:
				// The broker's add_segment_relseq_entry has no clause for it.
				r.anomaly(path, rec.Offset, CodeIDXUnknownSeq,
					format.Corrupt(rec.Offset, "relSeq", fmt.Errorf("%w: del/ack without publish", format.ErrInvalid)))
			case !s.del:
				s.del, s.delOffset = true, rec.Offset
			case !s.ack:
				s.ack = true
			default:
				r.anomaly(path, rec.Offset, CodeIDXUnknownSeq,
					format.Corrupt(rec.Offset, "relSeq", fmt.Errorf("%w: third del/ack record", format.ErrInvalid)))
			}
		}
	}
}

// journal applies journal records in file order on top of the segments.
func (r *idxReplayer) journal(path string, recs []rfmt.JournalRecord) {
	for _, rec := range recs {
		s := r.slots[rec.SeqID]
		if s == nil {
			s = &idxSlot{}
			r.slots[rec.SeqID] = s
		}
		switch rec.Kind {
		case rfmt.JournalPublish:
			if s.pub == nil {
				s.pub = &idxPub{rec.Persistent, rec.MsgID, rec.Expiry, rec.Size, rec.Embedded, path, rec.Offset}
			} else if s.pub.msgID != rec.MsgID {
				r.anomaly(path, rec.Offset, CodeJournalConflict,
					format.Corrupt(rec.Offset, "msgId", fmt.Errorf("%w: seq %d already published with another id",
						format.ErrInvalid, rec.SeqID)))
			}
		case rfmt.JournalDeliver:
			if !s.del {
				s.del, s.delOffset = true, rec.Offset
			}
		case rfmt.JournalAck:
			s.ack = true
		}
	}
}

// idxLive is one unacked v1 publish after the replay.
type idxLive struct {
	seq       uint64
	pub       *idxPub
	delivered bool
}

// live returns the unacked publishes in seq order.
func (r *idxReplayer) live() []idxLive {
	var out []idxLive
	for seq, s := range r.slots {
		if s.pub != nil && !s.ack {
			out = append(out, idxLive{seq, s.pub, s.del})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].seq < out[j].seq })
	return out
}
