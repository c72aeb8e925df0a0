package salvage

import (
	"context"
	"fmt"
	"slices"
	"sort"

	rmq "github.com/storectl/storectl/pkg/format/rocketmq"
	"github.com/storectl/storectl/pkg/scan"
	rmqscan "github.com/storectl/storectl/pkg/scan/rocketmq"
)

// ExportRocketMQ selects commitlog records of cfg and adds them to w:
// all (every valid record of the primary walk and every salvage candidate
// after a bad region), after-corruption (salvage candidates, and records
// at or past the recovery end, which the broker's recovery truncates
// away) and lost (records of consume queue units at or past the recovery
// end; units whose record is gone are listed in Missing). at-risk and
// unreferenced are RabbitMQ notions: ErrUnsupported. Bodies are read back
// through Store.RecordAt, which re-checks every record.
func ExportRocketMQ(ctx context.Context, cfg rmqscan.Config, o Options, w *Writer) (*Report, error) {
	rep := &Report{Store: StoreRocketMQ, Out: w.Dir(), By: map[string]int{}}
	if err := Supported(StoreRocketMQ, o.Select); err != nil {
		return rep, err
	}
	// Only the physical offsets of the walk's records are kept: a selected
	// record is decoded again (and checked) when its body is read.
	var walked []int64
	walk := cfg
	walk.OnMessage = func(m *rmq.Message, phy int64) error {
		walked = append(walked, phy)
		if cfg.OnMessage != nil {
			return cfg.OnMessage(m, phy)
		}
		return nil
	}
	res, err := rmqscan.ScanCommitLog(ctx, walk, scan.Options{})
	if err != nil {
		return nil, err
	}
	st, err := rmqscan.OpenStore(cfg)
	if err != nil {
		return nil, err
	}
	defer st.Close()
	rep.noteUnread(res)
	type cand struct {
		phy  int64
		why  []string
		sels []Selection
	}
	byPhy := map[int64]*cand{}
	add := func(phy int64, s Selection, why string) {
		if !o.has(s) {
			return
		}
		c := byPhy[phy]
		if c == nil {
			c = &cand{phy: phy}
			byPhy[phy] = c
		}
		c.sels, c.why = append(c.sels, s), append(c.why, why)
	}
	end := int64(-1)
	if res.RecoveryEnd != nil {
		end = *res.RecoveryEnd
	}
	all := o.has(SelectAll)
	for _, phy := range walked {
		if all { // the file lookup and reason only for a selection that keeps them
			rel, _, _ := st.Path(phy)
			add(phy, SelectAll, "all: a valid record of "+rel)
		}
		if end >= 0 && phy >= end {
			add(phy, SelectAfterCorruption, fmt.Sprintf(
				"after-corruption: at physical offset %d, at or past the recovery end %d; recovery drops it", phy, end))
		}
	}
	type want struct {
		topic string
		qid   int32
	}
	expect := map[int64]want{} // lost: the record must be the unit's message
	if o.has(SelectLost) {
		sorted := slices.Clone(walked)
		slices.Sort(sorted)
		units, missing, unknown, unread, err := lostUnits(cfg.Root, sorted, end, unknownFrom(res))
		if err != nil {
			return nil, err
		}
		rep.Missing = append(rep.Missing, missing...)
		for _, u := range unread {
			rep.Unread = append(rep.Unread, u[0]+": "+u[1])
			rep.unreadFile(u[0])
		}
		if unknown > 0 {
			rep.Notes = append(rep.Notes, fmt.Sprintf("%d consume queue unit(s) point at or past commitlog offset %d, in or after a file that could not be read: their records are unknown, not missing", unknown, unknownFrom(res)))
		}
		for _, u := range units {
			add(u.unit.CommitLogOffset, SelectLost, u.why(end))
			expect[u.unit.CommitLogOffset] = want{u.topic, u.queueID}
		}
	}
	for _, f := range res.Findings {
		if f.Code != rmqscan.CodeSalvage {
			continue
		}
		phy, ok := f.Details["phy_offset"].(int64)
		if !ok {
			continue
		}
		add(phy, SelectAll, "all: a valid record after a bad region of "+f.Path)
		add(phy, SelectAfterCorruption, fmt.Sprintf(
			"after-corruption: valid record after a bad region of %s (recovery end %d); recovery truncates it away", f.Path, end))
	}
	phys := make([]int64, 0, len(byPhy))
	for p := range byPhy {
		phys = append(phys, p)
	}
	sort.Slice(phys, func(i, j int) bool { return phys[i] < phys[j] })
	for _, phy := range phys {
		if err := ctx.Err(); err != nil {
			return rep, err
		}
		c := byPhy[phy]
		m, err := st.RecordAt(phy)
		if err != nil {
			rep.Skipped++
			rep.Notes = append(rep.Notes, fmt.Sprintf("phy %d: %v", phy, err))
			continue
		}
		rel, pos, _ := st.Path(phy)
		rec := rmqscan.NewRecord(&m, rel, phy-pos, pos)
		if x, ok := expect[phy]; ok && (x.topic != rec.Topic || x.qid != rec.QueueID) {
			// The unit points at another queue's record: its own is gone.
			rep.Missing = append(rep.Missing, MissingRef{Topic: x.topic, QueueID: &x.qid, PhyOffset: &phy,
				Queues: []string{fmt.Sprintf("%s/%d", x.topic, x.qid)}, Why: fmt.Sprintf("the record at its commitlog offset belongs to %s/%d", rec.Topic, rec.QueueID)})
			var sels []Selection
			var why []string
			for i, s := range c.sels {
				if s != SelectLost {
					sels, why = append(sels, s), append(why, c.why[i])
				}
			}
			if len(sels) == 0 {
				continue
			}
			c.sels, c.why = sels, why
		}
		qid, qoff, p := rec.QueueID, rec.QueueOffset, rec.PhyOffset
		props := make(map[string]any, len(rec.Properties))
		for k, v := range rec.Properties {
			props[k] = v
		}
		msg := Message{Store: StoreRocketMQ, MsgID: rec.MsgID, Path: rec.Path, Offset: rec.Offset, RecordSize: rec.Size,
			Topic: rec.Topic, QueueID: &qid, QueueOffset: &qoff, PhyOffset: &p, Tags: rec.Tags, Keys: rec.Keys,
			StoreTimestamp: rec.StoreTimestamp, BornTimestamp: rec.BornTimestamp, Properties: props, SelectedBy: dedupSel(c.sels), Why: c.why}
		if err := addMessage(w, rep, msg, m.Body); err != nil {
			return rep, err
		}
	}
	return rep, nil
}

// unknownFrom is the physical offset from which a scan that could not read
// a commitlog file in full knows nothing (rmqscan.ExtraRecoveryEndUnknown's
// at_least), or -1.
func unknownFrom(res *scan.Result) int64 {
	if u, ok := res.EndUnknown(); ok {
		return u.AtLeast
	}
	return -1
}
