package dledger

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/storectl/storectl/internal/storefile"
	fdl "github.com/storectl/storectl/pkg/format/dledger"
	rmq "github.com/storectl/storectl/pkg/format/rocketmq"
	"github.com/storectl/storectl/pkg/scan"
	"github.com/storectl/storectl/pkg/scan/cqueue"
)

// QueueState is one consume queue before and after the predicted recovery.
type QueueState struct {
	Topic     string `json:"topic"`
	QueueID   int32  `json:"queue_id"`
	Units     int64  `json:"units"`      // max offset on disk (CQ recovery's read)
	MaxOffset int64  `json:"max_offset"` // after the broker's next start
	Dropped   int64  `json:"dropped"`    // units it truncates
	// Unread is a file of the queue that could not be read: Units counts
	// those before it, the rest (and what recovery keeps) is unknown.
	Unread string `json:"unread,omitempty"`
}

// cqProblem is a consume queue unit that no inner record matches; whether
// it is reported depends on where recovery cuts the queues.
type cqProblem struct {
	q    *cqueue.Queue
	idx  int64
	unit rmq.CQUnit
	code string
	got  string
}

// matchCQ takes the consume queue units up to the inner record of e.
func (s *scanner) matchCQ(e *entry) {
	if s.merge == nil {
		return
	}
	phy := e.pos + fdl.BodyOffset
	for c := s.merge.peek(); c != nil && c.unit.CommitLogOffset <= phy; c = s.merge.peek() {
		if c.unit.CommitLogOffset < phy {
			s.cqUnmatched(c)
		} else if !c.unit.IsPlaceholder() {
			in := e.inner
			if in.size != c.unit.Size || !in.decoded || in.topic != c.q.Topic || in.queueID != c.q.QueueID || in.queueOff != c.idx {
				got := "?"
				if in.decoded {
					got = fmt.Sprintf("%s/%d@%d size %d", in.topic, in.queueID, in.queueOff, in.size)
				}
				s.cqBad = append(s.cqBad, cqProblem{q: c.q, idx: c.idx, unit: c.unit, code: CodeCQMismatch, got: got})
			}
		}
		s.advanceCQ()
	}
}

// cqUnmatched records a unit that points where no inner record starts.
func (s *scanner) cqUnmatched(c *cqCursor) {
	if !c.unit.IsPlaceholder() {
		s.cqBad = append(s.cqBad, cqProblem{q: c.q, idx: c.idx, unit: c.unit, code: CodeCQNoRecord})
	}
}

// advanceCQ moves the merge past its lowest unit, keeping the counts.
func (s *scanner) advanceCQ() {
	c := s.merge.peek()
	s.cqMax = max(s.cqMax, c.unit.CommitLogOffset+int64(c.unit.Size))
	s.merge.advance()
}

// finishCQ predicts DLedgerCommitLog's consume queue truncation and
// reports the units that disagree with the data.
func (s *scanner) finishCQ(context.Context) error {
	rc := s.rec
	if s.rocks || len(s.data) == 0 {
		return nil
	}
	cut := rc.WritePos
	if rc.Abnormal {
		cut = rc.AbnormalProcessOffset
	}
	if s.cqMax >= cut && !s.rUnread { // unread: where recovery cuts is unknown
		rc.CQCut = cut
	}
	// The abnormal recovery dispatches the records it scans again: a
	// queue that lagged grows up to them (below the cut).
	redispatch := map[string]int64{}
	if rc.Abnormal && rc.CQCut >= 0 {
		if err := s.redispatch(cut, redispatch); err != nil {
			return err
		}
	}
	bad := 0
	unknown := map[*cqueue.Queue]int64{}
	for _, p := range s.cqBad {
		if rc.CQCut >= 0 && p.unit.CommitLogOffset >= rc.CQCut {
			continue // the broker drops it
		}
		if s.rUnread && p.unit.CommitLogOffset >= s.unreadFrom {
			continue // its entry may be in the unread file: counted below, unknown
		}
		if s.inUnread(p.unit.CommitLogOffset) {
			unknown[p.q]++ // its entry may be in a data file that could not be read
			continue
		}
		bad++
		rel, off := p.q.Rel, p.idx*rmq.CQUnitSize
		if fi := fileFor(p.q, p.idx); fi != nil {
			rel, off = fi.Rel, p.idx*rmq.CQUnitSize-fi.Base
		}
		f := scan.Finding{Code: p.code, Severity: scan.Error, Path: rel, Offset: off, Length: rmq.CQUnitSize, Repair: scan.RepairRebuildIndex,
			Details: map[string]any{"phy_offset": p.unit.CommitLogOffset, "size": p.unit.Size, "queue_offset": p.idx}}
		if p.code == CodeCQNoRecord {
			f.Message = "consume queue unit points at an offset where no DLedger entry's inner record starts (inner offsets are entry pos + 48)"
		} else {
			f.Expected, f.Actual = fmt.Sprintf("%s/%d@%d size %d", p.q.Topic, p.q.QueueID, p.idx, p.unit.Size), p.got
			f.Message = "consume queue unit disagrees with the inner record it points at"
		}
		s.add(f)
	}
	for _, q := range s.queues {
		st := QueueState{Topic: q.Topic, QueueID: q.QueueID}
		if n := s.cqCount[q]; n != nil {
			st.Units = *n
		}
		if st.Units == 0 {
			st.Units = q.MinIndex()
		}
		if n := unknown[q]; n > 0 {
			s.add(scan.Finding{Code: CodeCQUnknown, Severity: scan.Warning, Path: q.Rel, Repair: scan.RepairNone,
				Details: map[string]any{"units": n, "waits_on": s.unreadRels()},
				Message: fmt.Sprintf("%d units of this queue point into %s, which could not be read: whether an entry holds their record is unknown, not lost", n, strings.Join(s.unreadRels(), ", "))})
		}
		if u := s.merge.unreadOf(q); u != nil {
			// The units from the file it could not read on are unknown:
			// nothing is said of how recovery cuts this queue.
			s.res.Unread(u.Rel, u.Err)
			s.add(scan.Finding{Code: CodeCQUnknown, Severity: scan.Warning, Path: u.Rel, Repair: scan.RepairNone,
				Details: map[string]any{"queue_offset": u.From, "waits_on": []string{u.Rel}},
				Message: fmt.Sprintf("%s could not be read: the units of %s/%d from queue offset %d on are unknown, and so is what the next start keeps of the queue", u.Rel, q.Topic, q.QueueID, u.From)})
			st.Unread, st.MaxOffset = u.Rel, st.Units
			q.Close()
			rc.Queues = append(rc.Queues, st)
			continue
		}
		st.MaxOffset = st.Units
		if rc.CQCut >= 0 {
			st.MaxOffset = firstAtOrAfter(q, q.MinIndex(), st.Units, rc.CQCut)
		}
		if rd, ok := redispatch[q.Topic+"\x00"+fmt.Sprint(q.QueueID)]; ok && rd > st.MaxOffset {
			st.MaxOffset = rd
		}
		st.Dropped = max(st.Units-st.MaxOffset, 0)
		if st.Dropped > 0 {
			s.add(scan.Finding{Code: CodeCQTruncated, Severity: scan.Warning, Path: q.Rel, Offset: st.MaxOffset * rmq.CQUnitSize, Repair: scan.RepairTruncate,
				Details: map[string]any{"units": st.Dropped, "cut": rc.CQCut, "abnormal": rc.Abnormal},
				Message: fmt.Sprintf("the broker's next start truncates %d units of this queue at data offset %d (DLedgerCommitLog truncateDirtyLogicFiles)", st.Dropped, rc.CQCut)})
		}
		if s.rUnread {
			// Units at or past the unread file: whether an entry holds
			// their record, and whether recovery keeps it, is unknown.
			if n := st.Units - firstAtOrAfter(q, q.MinIndex(), st.Units, s.unreadFrom); n > 0 {
				s.add(scan.Finding{Code: CodeCQUnknown, Severity: scan.Warning, Path: q.Rel, Repair: scan.RepairNone,
					Details: map[string]any{"units": n, "phy_offset_at_least": s.unreadFrom, "waits_on": []string{s.unread}},
					Message: fmt.Sprintf("%d units of this queue point at or past data offset %d, in or after %s, which could not be read: whether they have a record, and whether recovery keeps it, is unknown, not lost", n, s.unreadFrom, s.unread)})
			}
		} else if rc.StoreMaxOffset > 0 && s.cpUnread == "" {
			if n := min(st.MaxOffset, st.Units) - firstAtOrAfter(q, q.MinIndex(), min(st.MaxOffset, st.Units), rc.StoreMaxOffset); n > 0 {
				s.add(scan.Finding{Code: CodeCQBeyondCommit, Severity: scan.Warning, Path: q.Rel, Repair: scan.RepairNone,
					Details: map[string]any{"units": n, "committed_pos": rc.StoreMaxOffset},
					Message: fmt.Sprintf("%d units of this queue point at entries past the committed position %d: pulls return nothing for them until the commit advances", n, rc.StoreMaxOffset)})
			}
		}
		q.Close()
		rc.Queues = append(rc.Queues, st)
	}
	_ = bad
	return nil
}

// firstAtOrAfter is the first queue offset in [lo, hi) whose unit's
// commitlog offset is at or past phy (units are in offset order), hi when
// none is.
func firstAtOrAfter(q *cqueue.Queue, lo, hi, phy int64) int64 {
	return lo + int64(sort.Search(int(hi-lo), func(i int) bool {
		u, ok, err := q.Unit(lo + int64(i))
		return err != nil || !ok || u.CommitLogOffset >= phy
	}))
}

// redispatch reads the inner records of the abnormal recovery's start
// file on, below cut, and keeps per queue the highest queue offset + 1.
func (s *scanner) redispatch(cut int64, out map[string]int64) error {
	for i := s.abnStart; i < len(s.data); i++ {
		f := &s.data[i]
		if f.base >= cut {
			break
		}
		fh, err := storefile.Open(f.path)
		if err != nil {
			return err
		}
		r := fdl.NewReader(fh, f.size, f.base, s.cfg.MaxMessageSize+fdl.BodyOffset)
		for r.Next() {
			h := r.Header()
			if h.Pos+fdl.BodyOffset >= cut {
				break
			}
			m, err := rmq.CheckMessage(r.Body(), h.Pos+fdl.BodyOffset, s.cfg.MaxMessageSize)
			if err != nil {
				break
			}
			k := string(m.Topic) + "\x00" + fmt.Sprint(m.QueueID)
			out[k] = max(out[k], m.QueueOffset+1)
		}
		fh.Close()
	}
	return nil
}

func fileFor(q *cqueue.Queue, idx int64) *cqueue.File {
	at := idx * rmq.CQUnitSize
	for i := len(q.Files) - 1; i >= 0; i-- {
		if at >= q.Files[i].Base {
			return &q.Files[i]
		}
	}
	return nil
}

// minTimestamp is StoreCheckpoint.getMinTimestamp of <root>/checkpoint.
func (s *scanner) minTimestamp() int64 {
	b, err := storefile.ReadFile(filepath.Join(s.cfg.Root, "checkpoint"))
	if err != nil {
		return 0
	}
	cp, err := rmq.DecodeCheckpoint(b, 0)
	if err != nil && !errors.Is(err, os.ErrNotExist) && len(b) < 24 {
		return 0
	}
	return cp.MinTimestamp()
}

// inUnread reports whether data offset off lies in a data file the walk
// could not read.
func (s *scanner) inUnread(off int64) bool {
	for _, sp := range s.unreadSpans {
		if off >= sp[0] && off < sp[1] {
			return true
		}
	}
	return false
}

// unreadRels names the data files the walk could not read.
func (s *scanner) unreadRels() []string {
	var out []string
	for _, sp := range s.unreadSpans {
		if rel, _ := s.locate(sp[0]); rel != "" {
			out = append(out, rel)
		}
	}
	return out
}
