package dledger

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

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
}

// checkCQ checks every file consume queue unit against the inner records
// and predicts DLedgerCommitLog's consume queue truncation.
func (s *scanner) checkCQ(context.Context) error {
	rc := s.rec
	if l, ok := cqueue.RocksDB(s.cfg.Root); ok {
		s.add(scan.Finding{Code: CodeRocksDBCQ, Severity: scan.Info, Path: cqueue.Dir, Details: map[string]any{"files": l.Files()},
			Message: "consumequeue/ holds a RocksDB consume queue: derived data storectl does not read; it is not checked against the DLedger entries"})
		return nil
	}
	qs, err := cqueue.List(s.cfg.Root)
	if err != nil {
		return err
	}
	type qinfo struct {
		q     *cqueue.Queue
		units []rmq.CQUnit
		first int64
	}
	var infos []qinfo
	maxPhy := int64(-1)
	for _, q := range qs {
		qi := qinfo{q: q, first: q.MinIndex()}
		if _, err := q.Each(func(_ int64, u rmq.CQUnit) bool { qi.units = append(qi.units, u); return true }); err != nil {
			return err
		}
		if n := len(qi.units); n > 0 {
			maxPhy = max(maxPhy, qi.units[n-1].CommitLogOffset+int64(qi.units[n-1].Size))
		}
		infos = append(infos, qi)
	}
	cut := rc.WritePos
	if rc.Abnormal {
		cut = s.abnormalProcessOffset(s.minTimestamp(), rc.WritePos)
		rc.AbnormalProcessOffset = cut
	}
	if maxPhy >= cut {
		rc.CQCut = cut
	}
	byPhy := make([]int, len(s.entries))
	for i := range byPhy {
		byPhy[i] = i
	}
	sort.Slice(byPhy, func(a, b int) bool { return s.entries[byPhy[a]].pos < s.entries[byPhy[b]].pos })
	find := func(phy int64) *entry {
		i := sort.Search(len(byPhy), func(i int) bool { return s.entries[byPhy[i]].pos+fdl.BodyOffset >= phy })
		if i < len(byPhy) && s.entries[byPhy[i]].pos+fdl.BodyOffset == phy {
			return &s.entries[byPhy[i]]
		}
		return nil
	}
	// Records the abnormal recovery dispatches again (from its start file
	// up to where it stops), per queue: the highest queue offset.
	redispatch := map[string]int64{}
	if rc.Abnormal {
		for i := range s.entries {
			e := &s.entries[i]
			if e.pos+fdl.BodyOffset >= cut || !e.inner.ok {
				continue
			}
			k := s.topics[e.inner.topic] + "\x00" + fmt.Sprint(e.inner.queueID)
			redispatch[k] = max(redispatch[k], e.inner.queueOff+1)
		}
	}
	for _, qi := range infos {
		st := QueueState{Topic: qi.q.Topic, QueueID: qi.q.QueueID, Units: qi.first + int64(len(qi.units))}
		st.MaxOffset = st.Units
		beyondCommit := 0
		for k, u := range qi.units {
			idx := qi.first + int64(k)
			if rc.CQCut >= 0 && u.CommitLogOffset >= rc.CQCut {
				st.MaxOffset = min(st.MaxOffset, idx)
				continue
			}
			if u.IsPlaceholder() {
				continue
			}
			rel, off := qi.q.Rel, idx*rmq.CQUnitSize
			if fi := fileFor(qi.q, idx); fi != nil {
				rel, off = fi.Rel, idx*rmq.CQUnitSize-fi.Base
			}
			e := find(u.CommitLogOffset)
			switch {
			case e == nil:
				s.add(scan.Finding{Code: CodeCQNoRecord, Severity: scan.Error, Path: rel, Offset: off, Length: rmq.CQUnitSize, Repair: scan.RepairRebuildIndex,
					Details: map[string]any{"phy_offset": u.CommitLogOffset, "size": u.Size, "queue_offset": idx},
					Message: "consume queue unit points at an offset where no DLedger entry's inner record starts (inner offsets are entry pos + 48)"})
				continue
			case e.inner.size != u.Size || !e.inner.decoded || s.topics[e.inner.topic] != qi.q.Topic || e.inner.queueID != qi.q.QueueID || e.inner.queueOff != idx:
				got := "?"
				if e.inner.decoded {
					got = fmt.Sprintf("%s/%d@%d size %d", s.topics[e.inner.topic], e.inner.queueID, e.inner.queueOff, e.inner.size)
				}
				s.add(scan.Finding{Code: CodeCQMismatch, Severity: scan.Error, Path: rel, Offset: off, Length: rmq.CQUnitSize, Repair: scan.RepairRebuildIndex,
					Expected: fmt.Sprintf("%s/%d@%d size %d", qi.q.Topic, qi.q.QueueID, idx, u.Size), Actual: got,
					Message: "consume queue unit disagrees with the inner record it points at"})
			}
			if u.CommitLogOffset >= rc.StoreMaxOffset && rc.StoreMaxOffset > 0 {
				beyondCommit++
			}
		}
		if rd, ok := redispatch[qi.q.Topic+"\x00"+fmt.Sprint(qi.q.QueueID)]; ok && rd > st.MaxOffset {
			st.MaxOffset = rd
		}
		st.Dropped = max(st.Units-st.MaxOffset, 0)
		if st.Dropped > 0 {
			s.add(scan.Finding{Code: CodeCQTruncated, Severity: scan.Warning, Path: qi.q.Rel, Offset: st.MaxOffset * rmq.CQUnitSize, Repair: scan.RepairTruncate,
				Details: map[string]any{"units": st.Dropped, "cut": rc.CQCut, "abnormal": rc.Abnormal},
				Message: fmt.Sprintf("the broker's next start truncates %d units of this queue at data offset %d (DLedgerCommitLog truncateDirtyLogicFiles)", st.Dropped, rc.CQCut)})
		}
		if beyondCommit > 0 {
			s.add(scan.Finding{Code: CodeCQBeyondCommit, Severity: scan.Warning, Path: qi.q.Rel, Repair: scan.RepairNone,
				Details: map[string]any{"units": beyondCommit, "committed_pos": rc.StoreMaxOffset},
				Message: fmt.Sprintf("%d units of this queue point at entries past the committed position %d: pulls return nothing for them until the commit advances", beyondCommit, rc.StoreMaxOffset)})
		}
		rc.Queues = append(rc.Queues, st)
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
	b, err := os.ReadFile(filepath.Join(s.cfg.Root, "checkpoint"))
	if err != nil {
		return 0
	}
	cp, err := rmq.DecodeCheckpoint(b, 0)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		if len(b) < 24 {
			return 0
		}
	}
	return cp.MinTimestamp()
}

var _ = strings.Compare
