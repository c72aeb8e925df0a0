// Package rmq5x plans the repairs of the RocketMQ 5.x stores beyond the
// commitlog, through pkg/repair's plan, apply, backup and undo: after a
// commitlog truncation, neutralise the timer units that point at or past
// the new end or at another record, and cap committed consumer offsets at
// their queue's new max; truncate a DLedger log to where its recovery
// stops; rebuild DLedger index files; move a RocksDB consume queue aside
// so the broker rebuilds it.
//
// Every planner only reads; it adds actions to a repair.Plan.
package rmq5x

import (
	"context"
	"encoding/binary"
	"fmt"

	ftimer "github.com/storectl/storectl/pkg/format/timer"
	"github.com/storectl/storectl/pkg/repair"
	"github.com/storectl/storectl/pkg/scan"
	"github.com/storectl/storectl/pkg/scan/rmqconfig"
	timerscan "github.com/storectl/storectl/pkg/scan/timer"
)

// NeutralMagic is what a neutralised unit's magic becomes: DEFAULT|DELETE.
// The unit stays valid for recovery's walk (a zeroed unit would stop it
// and truncate every later unit), and the dequeue fires nothing through
// it: a DELETE unit only adds its record's TIMER_DEL_UNIQKEY, if any, to
// its slot's delete list (TimerMessageStore.dequeue and
// TimerDequeueGetMessageService, apache/rocketmq rocketmq-all-5.3.3).
const NeutralMagic = ftimer.MagicDefault | ftimer.MagicDelete

// staleCodes are the timer findings whose unit truncate neutralises.
var staleCodes = map[string]bool{
	timerscan.CodeUnitBeyondEnd: true, timerscan.CodeUnitAtRecoveryEnd: true, timerscan.CodeUnitNotRecord: true,
	timerscan.CodeUnitSizeMismatch: true, timerscan.CodeUnitWrongTopic: true,
}

// TimerFix is what PlanTimerFix planned.
type TimerFix struct {
	CommitLogEnd int64          `json:"commitlog_end"`
	Units        int            `json:"units"`   // units neutralised
	ByCode       map[string]int `json:"by_code"` // why
	Files        []string       `json:"files,omitempty"`
	// Findings are the timer scan's findings the units' actions come
	// from, one per action, for the plan's report.
	Findings []scan.Finding `json:"-"`
}

// PlanTimerFix adds to plan one 4-byte write per timer unit that points at
// or past end (the commitlog's recovery end after the plan's truncation)
// or at another record (apache/rocketmq #10668), setting its magic to
// NeutralMagic. cfg is the timer scan config (Root, CommitLog, ...);
// its RecoveryEnd is set to end. A store without a timer store adds
// nothing.
func PlanTimerFix(ctx context.Context, plan *repair.Plan, cfg timerscan.Config, end int64) (*TimerFix, error) {
	fix := &TimerFix{CommitLogEnd: end, ByCode: map[string]int{}}
	if !timerscan.Present(cfg.Root) {
		return fix, nil
	}
	cfg.RecoveryEnd, cfg.MaxFindings = end, 1<<30
	res, err := timerscan.Scan(ctx, cfg, scan.Options{})
	if err != nil {
		return nil, err
	}
	if res.Incomplete {
		return nil, fmt.Errorf("timer store scan incomplete, refusing to plan from it: %v", res.Errors)
	}
	files := map[string]bool{}
	for _, f := range res.Findings {
		if !staleCodes[f.Code] {
			continue
		}
		a := repair.Action{Op: repair.OpWriteRange, Path: f.Path, Offset: f.Offset + 12, Length: 4,
			Data: binary.BigEndian.AppendUint32(nil, NeutralMagic), Reason: f.Code,
			Lost: repair.Loss{Records: 1, MsgIDs: ids(f.MsgID), Note: fmt.Sprintf(
				"timer unit at %s@%d (offset_py %v, deliver %v) neutralised: magic set to DEFAULT|DELETE so the dequeue fires nothing through it",
				f.Path, f.Offset, f.Details["offset_py"], f.Details["deliver_ms"])}}
		if err := plan.Add(a, repair.SnapshotOptions{SkipWholeFile: true}); err != nil {
			return nil, err
		}
		fix.Units++
		fix.ByCode[f.Code]++
		fix.Findings = append(fix.Findings, f)
		if !files[f.Path] {
			files[f.Path] = true
			fix.Files = append(fix.Files, f.Path)
		}
	}
	return fix, nil
}

func ids(id string) []string {
	if id == "" {
		return nil
	}
	return []string{id}
}

// OffsetCap is what PlanOffsetCap planned.
type OffsetCap struct {
	Capped []rmqconfig.Offset `json:"capped,omitempty"`
	Files  []string           `json:"files,omitempty"`
	// Findings are the findings the replace-file actions come from (as
	// verify reports them: one per capped offset), for the plan's report.
	Findings []scan.Finding `json:"-"`
}

// PlanOffsetCap adds one replace-file per offset table (consumerOffset.json,
// lmqConsumerOffset.json, delayOffset.json) that has committed offsets above
// their queue's max after a recovery to end: the file as the broker loads
// it (itself, or its .bak when it is torn) with those offsets lowered to
// the max and every other byte kept.
func PlanOffsetCap(plan *repair.Plan, root string, end int64) (*OffsetCap, error) {
	oc := &OffsetCap{}
	for _, t := range []struct {
		rel    string
		decode func([]byte) (rmqOffsetTable, error)
	}{{consumerOffsetFile, decodeConsumer}, {lmqOffsetFile, decodeConsumer}, {delayOffsetFile, decodeDelay}} {
		above, unknown, _, err := rmqconfig.AboveMax(root, t.rel, end, t.decode)
		if err != nil {
			return nil, err
		}
		if len(unknown) > 0 {
			// Whether these are above their queue's max is not known: a
			// cap planned without them would read as "nothing else to
			// cap".
			return nil, fmt.Errorf("%s: %d offset(s) of %s could not be compared with their queue's max (%s could not be read), refusing to plan the offset cap",
				t.rel, len(unknown), unknown[0].Topic, unknown[0].WaitsOn)
		}
		if len(above) == 0 {
			continue
		}
		b, err := readRel(root, above[0].File)
		if err != nil {
			return nil, err
		}
		set := make([]queueOffset, 0, len(above))
		for _, o := range above {
			set = append(set, queueOffset{Key: o.Key, QueueID: o.QueueID, Offset: o.Max, Start: o.Start, End: o.End})
			oc.Capped = append(oc.Capped, o)
		}
		oc.Findings = append(oc.Findings, rmqconfig.AboveFindings(t.rel, above)...)
		nb, err := setOffsets(b, set)
		if err != nil {
			return nil, err
		}
		a := repair.Action{Op: repair.OpReplaceFile, Path: t.rel, Data: nb, Reason: rmqconfig.CodeOffsetAbove,
			Lost: repair.Loss{Note: fmt.Sprintf("%d committed offsets lowered to their queue's max after the truncation (from %s); a consumer re-reads nothing it had not read, and skips nothing when producers refill the queue", len(above), above[0].File)}}
		if err := plan.Add(a, repair.SnapshotOptions{}); err != nil {
			return nil, err
		}
		oc.Files = append(oc.Files, t.rel)
	}
	return oc, nil
}
