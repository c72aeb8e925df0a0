package salvage

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	fdl "github.com/storectl/storectl/pkg/format/dledger"
	rmq "github.com/storectl/storectl/pkg/format/rocketmq"
	"github.com/storectl/storectl/pkg/scan"
	dlscan "github.com/storectl/storectl/pkg/scan/dledger"
	rmqscan "github.com/storectl/storectl/pkg/scan/rocketmq"
	timerscan "github.com/storectl/storectl/pkg/scan/timer"
)

// ExportDLedger adds the inner messages of a DLedger log to w and rep:
// all selects every valid inner record, after-corruption the entries past
// the point where DLedger's recovery stops (it truncates them away), lost
// (when the consume queues are the log's: no commitlog/ beside one
// dledger-* dir) the records of consume queue units at or past where
// DLedger's recovery stops keeping data (Recovery.WritePos: their entries
// are truncated away), as ExportRocketMQ does for a commitlog's recovery
// end: units whose inner record is gone are listed in rep.Missing, those
// into a data file that could not be read are unknown (a note), not
// missing.
func ExportDLedger(ctx context.Context, cfg dlscan.Config, o Options, w *Writer, rep *Report) error {
	if !o.has(SelectAll) && !o.has(SelectAfterCorruption) && !o.has(SelectLost) {
		return nil
	}
	var phys []int64
	cfg.OnMessage = func(m *rmq.Message, phy int64, err error) error {
		if err == nil {
			phys = append(phys, phy)
		}
		return nil
	}
	res, err := dlscan.Scan(ctx, cfg, scan.Options{})
	if err != nil {
		return err
	}
	rep.noteUnread(res)
	rc, _ := res.Extra["dledger"].(*dlscan.Recovery)
	if rc == nil {
		return nil
	}
	l, err := dlscan.OpenLog(cfg.Dir, cfg.MaxMessageSize)
	if err != nil {
		return err
	}
	defer l.Close()
	dataRel := map[int64]string{}
	for _, f := range res.Files {
		if f.Kind == "dledger-data" {
			if base, err := rmq.ParseFileName(baseName(f.Path)); err == nil {
				dataRel[base] = f.Path
			}
		}
	}
	bases := make([]int64, 0, len(dataRel))
	for b := range dataRel {
		bases = append(bases, b)
	}
	sort.Slice(bases, func(i, j int) bool { return bases[i] < bases[j] })
	type want struct {
		topic string
		qid   int32
		why   string
	}
	lost := map[int64]want{} // lost: the record must be the unit's message
	if o.has(SelectLost) && ownsQueues(cfg) {
		// The inner offsets are the consume queues' commitlog offsets.
		// DLedger's recovery keeps the data up to WritePos: the records
		// of units past it are truncated away with their entries (units
		// cut between an abnormal recovery's processOffset and WritePos
		// are dispatched again: not lost).
		end, from := rc.WritePos, int64(-1)
		if rc.Unread != "" {
			end = -1 // where recovery stops is unknown
		}
		// A unit pointing at or past a data file that could not be read
		// may have its record there: unknown, not missing.
		dlRel, _ := res.Layout["dledger_dir"].(string)
		dataDir := dlRel + "/" + fdl.DataDir + "/"
		for _, f := range res.Findings {
			if f.Code != scan.CodeUnreadable || !strings.HasPrefix(f.Path, dataDir) {
				continue
			}
			if b, err := rmq.ParseFileName(baseName(f.Path)); err == nil && (from < 0 || b < from) {
				from = b
			}
		}
		sorted := slices.Clone(phys)
		slices.Sort(sorted)
		units, missing, unknown, unread, err := lostUnits(cfg.Root, sorted, end, from)
		if err != nil {
			return err
		}
		rep.Missing = append(rep.Missing, missing...)
		for _, u := range unread {
			rep.Unread = append(rep.Unread, u[0]+": "+u[1])
			rep.unreadFile(u[0])
		}
		if unknown > 0 {
			rep.Notes = append(rep.Notes, fmt.Sprintf("%d consume queue unit(s) point at or past DLedger data offset %d, in or after a data file that could not be read: their records are unknown, not missing", unknown, from))
		}
		for _, u := range units {
			lost[u.unit.CommitLogOffset] = want{u.topic, u.queueID, u.why(end)}
		}
	}
	for _, phy := range phys {
		if err := ctx.Err(); err != nil {
			return err
		}
		var sels []Selection
		var why []string
		if o.has(SelectAll) {
			sels, why = append(sels, SelectAll), append(why, "all: a valid DLedger inner record")
		}
		if o.has(SelectAfterCorruption) && phy-fdl.BodyOffset >= rc.WritePos {
			sels = append(sels, SelectAfterCorruption)
			why = append(why, fmt.Sprintf("after-corruption: DLedger entry at data offset %d, past where its recovery stops (%d: %s); recovery truncates it away", phy-fdl.BodyOffset, rc.WritePos, rc.StopReason))
		}
		x, isLost := lost[phy]
		if isLost {
			sels, why = append(sels, SelectLost), append(why, x.why)
		}
		if len(sels) == 0 {
			continue
		}
		m, err := l.RecordAt(phy)
		if err != nil {
			rep.Skipped++
			rep.Notes = append(rep.Notes, fmt.Sprintf("DLedger record at %d: %v", phy, err))
			continue
		}
		base := bases[max(sort.Search(len(bases), func(i int) bool { return bases[i] > phy })-1, 0)]
		rec := rmqscan.NewRecord(&m, dataRel[base], base, phy-base)
		if isLost && (x.topic != rec.Topic || x.qid != rec.QueueID) {
			// The unit points at another queue's record: its own is gone.
			p := phy
			rep.Missing = append(rep.Missing, MissingRef{Topic: x.topic, QueueID: &x.qid, PhyOffset: &p,
				Queues: []string{fmt.Sprintf("%s/%d", x.topic, x.qid)}, Why: fmt.Sprintf("the record at its commitlog offset belongs to %s/%d", rec.Topic, rec.QueueID)})
			sels, why = sels[:len(sels)-1], why[:len(why)-1]
			if len(sels) == 0 {
				continue
			}
		}
		if err := addRecord(w, rep, &rec, m.Body, sels, why, rec.Topic, rec.QueueID); err != nil {
			return err
		}
	}
	return nil
}

// ownsQueues reports whether the consume queues under cfg.Root index the
// DLedger log of cfg: the store has no commitlog/ of its own and one
// dledger-* dir (with several, or a commitlog, whose they are is not
// known here).
func ownsQueues(cfg dlscan.Config) bool {
	if _, err := os.Lstat(filepath.Join(cfg.Root, "commitlog")); err == nil {
		return false
	}
	return len(dlscan.Dirs(cfg.Root)) == 1
}

func baseName(p string) string {
	for i := len(p) - 1; i >= 0; i-- {
		if p[i] == '/' {
			return p[i+1:]
		}
	}
	return p
}

// ExportTimerLost adds the timer messages that the broker's timer recovery
// will never deliver (pkg/scan/timer's prediction: the record is past the
// recovery end, the unit unreachable, the wheel's 7 days passed) to w and
// rep under lost: the commitlog record of each, read even past the
// recovery end, exported as a message of its real topic and queue
// (REAL_TOPIC, REAL_QID) with its TIMER_OUT_MS deliver time kept in the
// properties. A message whose record is gone is listed in rep.Notes with
// its deliver time and unit.
func ExportTimerLost(ctx context.Context, cfg timerscan.Config, o Options, w *Writer, rep *Report) error {
	if !o.has(SelectLost) || !timerscan.Present(cfg.Root) {
		return nil
	}
	res, err := timerscan.Scan(ctx, cfg, scan.Options{})
	if err != nil {
		return err
	}
	rep.noteUnread(res)
	sum, _ := res.Extra["timer"].(*timerscan.Summary)
	if sum == nil || sum.Recovery == nil {
		return nil
	}
	cl := cfg.CommitLog
	if cl == nil {
		fc, err := timerscan.NewFileCommitLog(rmqscan.Config{Root: cfg.Root, CommitLogDir: cfg.CommitLogDir, MappedFileSize: cfg.MappedFileSize})
		if err != nil {
			return err
		}
		defer fc.Close()
		cl = fc
	}
	paths, err := rmqscan.OpenStore(rmqscan.Config{Root: cfg.Root, CommitLogDir: cfg.CommitLogDir, MappedFileSize: cfg.MappedFileSize})
	if err == nil {
		defer paths.Close()
	}
	for _, out := range sum.Recovery.Messages {
		if out.Outcome != timerscan.OutcomeLost {
			continue
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		why := fmt.Sprintf("lost: a timer message the broker's timer recovery never delivers (due %d, timer unit at timerlog offset %d%s)", out.DeliverMs, out.Unit, suffix(out.Why))
		m, err := cl.RecordAt(out.OffsetPy)
		if m.Raw == nil || out.UniqKey != "" && m.UniqKey() != out.UniqKey || string(m.Topic) != timerscan.Topic {
			reason := "its record is gone"
			if err != nil {
				reason += " (" + err.Error() + ")"
			}
			rep.Notes = append(rep.Notes, fmt.Sprintf("timer message at commitlog offset %d (size %d, real topic %q, due %d, unit %d): %s; nothing to export",
				out.OffsetPy, out.SizePy, out.RealTopic, out.DeliverMs, out.Unit, reason))
			continue
		}
		rel, pos := "commitlog", out.OffsetPy
		if paths != nil {
			if r, p, ok := paths.Path(out.OffsetPy); ok {
				rel, pos = r, p
			}
		}
		rec := rmqscan.NewRecord(&m, rel, out.OffsetPy-pos, pos)
		topic, qid := rec.Topic, rec.QueueID
		if v := rec.Properties[timerscan.PropRealTopic]; v != "" {
			topic = v
		}
		if v, err := strconv.ParseInt(rec.Properties[timerscan.PropRealQueueID], 10, 32); err == nil {
			qid = int32(v)
		}
		if err := addRecord(w, rep, &rec, m.Body, []Selection{SelectLost}, []string{why}, topic, qid); err != nil {
			return err
		}
	}
	return nil
}

func suffix(s string) string {
	if s == "" {
		return ""
	}
	return "; " + s
}

// addRecord writes one RocketMQ record as a salvaged message of topic/qid.
func addRecord(w *Writer, rep *Report, rec *rmqscan.Record, body []byte, sels []Selection, why []string, topic string, qid int32) error {
	qoff, p := rec.QueueOffset, rec.PhyOffset
	props := make(map[string]any, len(rec.Properties))
	for k, v := range rec.Properties {
		props[k] = v
	}
	msg := Message{Store: StoreRocketMQ, MsgID: rec.MsgID, Path: rec.Path, Offset: rec.Offset, RecordSize: rec.Size,
		Topic: topic, QueueID: &qid, QueueOffset: &qoff, PhyOffset: &p, Tags: rec.Tags, Keys: rec.Keys,
		StoreTimestamp: rec.StoreTimestamp, Properties: props, SelectedBy: dedupSel(sels), Why: why}
	if err := w.Add(msg, body); err != nil {
		return err
	}
	rep.Selected++
	rep.Bytes += int64(len(body))
	for _, s := range msg.SelectedBy {
		rep.By[string(s)]++
	}
	return nil
}
