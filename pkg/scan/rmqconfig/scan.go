// Package rmqconfig checks a RocketMQ broker's config/*.json files: that
// each parses (ConfigManager.persist rewrites them in place without fsync,
// so a crash leaves them torn or empty, and ConfigManager.load falls back
// to the .bak copy only then), and that no committed consumer offset
// (consumerOffset.json, lmqConsumerOffset.json) or schedule offset
// (delayOffset.json) is above the max offset its queue will have after
// the broker's recovery: a consumer whose committed offset is past the
// max is corrected only when it pulls, and if producers refill the queue
// first the messages in between are skipped silently.
package rmqconfig

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"

	"github.com/storectl/storectl/internal/storefile"
	"github.com/storectl/storectl/pkg/format"
	rmq "github.com/storectl/storectl/pkg/format/rocketmq"
	"github.com/storectl/storectl/pkg/scan"
	"github.com/storectl/storectl/pkg/scan/cqueue"
)

// Finding codes (store.component.what); never rename one.
const (
	CodeTorn        = "rocketmq.config.torn-json"    // the file does not parse; the broker loads .bak
	CodeEmpty       = "rocketmq.config.empty"        // empty file; the broker loads .bak
	CodeBothBad     = "rocketmq.config.bak-unusable" // file and .bak unusable: load fails or starts empty
	CodeBakDiffers  = "rocketmq.config.bak-older"    // what the fallback loses against the torn file's intent
	CodeOffsetAbove = "rocketmq.config.consumer-offset-above-max"
	CodeDelayAbove  = "rocketmq.config.delay-offset-above-max"
	// CodeOffsetUnknown: a committed or delay offset whose queue's max
	// could not be known (a consume queue file of it could not be read).
	CodeOffsetUnknown = "rocketmq.config.offset-unknown"
	CodeOffsetsNotChk = "rocketmq.config.offsets-not-checked"
)

// ScheduleTopic is the delay-level topic (ScheduleMessageService).
const ScheduleTopic = "SCHEDULE_TOPIC_XXXX"

// Config says what to check.
type Config struct {
	Root string
	// RecoveryEnd is the commitlog offset the broker's recovery keeps up
	// to; a queue's max offset is its units below it. Negative: every
	// unit counts.
	RecoveryEnd int64
}

// Offset is one committed offset above its queue's max.
type Offset struct {
	File      string `json:"file"`
	Key       string `json:"key"`
	Topic     string `json:"topic"`
	Group     string `json:"group,omitempty"`
	QueueID   int32  `json:"queue_id"`
	Committed int64  `json:"committed"`
	Max       int64  `json:"max"`
	// Start and End locate the number in File.
	Start int64 `json:"start"`
	End   int64 `json:"end"`
	// WaitsOn is, for an offset AboveMax could not compare (its unknown),
	// the consume queue file that could not be read; Max is then -1.
	WaitsOn string `json:"waits_on,omitempty"`
}

// Summary is Result.Extra["config"].
type Summary struct {
	Files        []string `json:"files"`
	AboveMax     []Offset `json:"offsets_above_max,omitempty"`
	Unknown      []Offset `json:"offsets_unknown,omitempty"` // their queue could not be read
	OffsetsTotal int      `json:"offsets"`
}

// Load reads a config file the way ConfigManager.load does: the file, or
// its .bak when the file is missing... empty or does not decode. It
// returns the bytes used, which of the two they came from ("" when
// neither), and the decode error of the file itself.
//
// A file or .bak that is there but cannot be read (permission, a dir or
// FIFO in its place) gives an *UnreadError naming it: what the broker
// loads is then unknown.
func Load(root, rel string, decode func([]byte) error) (b []byte, from string, fileErr error, err error) {
	p := filepath.Join(root, filepath.FromSlash(rel))
	b, err = storefile.ReadFile(p)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		b = nil
	case err != nil:
		return nil, "", nil, &UnreadError{Rel: rel, Err: err}
	}
	if len(b) > 0 {
		if fileErr = decode(b); fileErr == nil {
			return b, rel, nil, nil
		}
	}
	bak, berr := storefile.ReadFile(p + rmq.BakSuffix)
	if errors.Is(berr, fs.ErrNotExist) || berr == nil && len(bak) == 0 {
		return nil, "", fileErr, nil
	}
	if berr != nil {
		return nil, "", fileErr, &UnreadError{Rel: rel + rmq.BakSuffix, Err: berr}
	}
	if decode(bak) != nil {
		return nil, "", fileErr, nil
	}
	return bak, rel + rmq.BakSuffix, fileErr, nil
}

// UnreadError is a config file that is there but could not be read.
type UnreadError struct {
	Rel string // relative to the data dir
	Err error
}

func (e *UnreadError) Error() string { return e.Rel + ": " + e.Err.Error() }
func (e *UnreadError) Unwrap() error { return e.Err }

// Scan checks config/ under cfg.Root.
func Scan(ctx context.Context, cfg Config, opts scan.Options) (*scan.Result, error) {
	res := &scan.Result{Store: scan.RocketMQ}
	sum := &Summary{}
	res.Extra = map[string]any{"config": sum}
	dir := filepath.Join(cfg.Root, "config")
	ents, err := storefile.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return res, nil
	}
	if err != nil {
		return res, err
	}
	// A config file that cannot be read is named once (an offset table
	// is read twice: its JSON, then its offsets) and makes the result
	// incomplete; nothing is concluded from its content.
	unread := map[string]bool{}
	fail := func(err error) {
		var ue *UnreadError
		if errors.As(err, &ue) {
			if unread[ue.Rel] {
				return
			}
			unread[ue.Rel] = true
			res.Add(scan.Unreadable(ue.Rel, ue.Err))
		}
		res.Fail(err)
	}
	for _, e := range ents {
		n := e.Name()
		if filepath.Ext(n) != ".json" {
			continue
		}
		rel := "config/" + n
		if !e.Type().IsRegular() {
			if nr, ok := storefile.Irregular(dir, e); ok {
				fail(&UnreadError{Rel: rel, Err: nr})
			}
			continue
		}
		sum.Files = append(sum.Files, rel)
		if err := checkJSON(cfg.Root, rel, res); err != nil {
			fail(err)
		}
	}
	if err := ctx.Err(); err != nil {
		return res, err
	}
	if l, ok := cqueue.RocksDB(cfg.Root); ok {
		res.Add(scan.Finding{Code: CodeOffsetsNotChk, Severity: scan.Info, Path: cqueue.Dir, Repair: scan.RepairNone,
			Details: map[string]any{"rocksdb_files": l.Files()},
			Message: "the consume queues are in RocksDB: committed offsets are not compared with the queues' max offsets"})
		return res, nil
	}
	for _, f := range []struct {
		rel    string
		decode func([]byte) (rmq.OffsetTable, error)
	}{{rmq.ConsumerOffsetFile, rmq.DecodeConsumerOffsets},
		{rmq.LMQConsumerOffsetFile, rmq.DecodeConsumerOffsets},
		{rmq.DelayOffsetFile, rmq.DecodeDelayOffsets}} {
		above, unknown, n, err := AboveMax(cfg.Root, f.rel, cfg.RecoveryEnd, f.decode)
		if err != nil {
			fail(err)
			continue
		}
		sum.OffsetsTotal += n
		sum.AboveMax = append(sum.AboveMax, above...)
		sum.Unknown = append(sum.Unknown, unknown...)
		res.Add(AboveFindings(f.rel, above)...)
		res.Add(unknownFindings(f.rel, unknown)...)
	}
	res.SortFindings()
	return res, nil
}

// AboveFindings are the findings of the offsets of the offset table rel
// that AboveMax returned: what verify reports and what truncate's offset
// cap acts on.
func AboveFindings(rel string, above []Offset) []scan.Finding {
	code := CodeOffsetAbove
	if rel == rmq.DelayOffsetFile {
		code = CodeDelayAbove
	}
	out := make([]scan.Finding, 0, len(above))
	for _, o := range above {
		msg := fmt.Sprintf("group %s has committed offset %d in %s/%d, above the queue's max offset %d after recovery: the broker corrects it only when the consumer pulls; if producers refill the queue first, %d messages are skipped",
			o.Group, o.Committed, o.Topic, o.QueueID, o.Max, o.Committed-o.Max)
		if code == CodeDelayAbove {
			msg = fmt.Sprintf("delay level %d's offset %d is above the max offset %d of %s/%d: scheduled messages between are not delivered", o.QueueID, o.Committed, o.Max, o.Topic, o.QueueID-1)
		}
		out = append(out, scan.Finding{Code: code, Severity: scan.Warning, Path: o.File, Offset: o.Start, Length: o.End - o.Start,
			Expected: "<= " + strconv.FormatInt(o.Max, 10), Actual: strconv.FormatInt(o.Committed, 10), Repair: scan.RepairTruncate,
			Details: map[string]any{"topic": o.Topic, "group": o.Group, "queue_id": o.QueueID, "key": o.Key, "max_offset": o.Max},
			Message: msg})
	}
	return out
}

// unknownFindings are the findings of the offsets of rel that AboveMax
// could not compare: their queue's max is unknown, so whether a consumer
// skips messages is too.
func unknownFindings(rel string, unknown []Offset) []scan.Finding {
	out := make([]scan.Finding, 0, len(unknown))
	for _, o := range unknown {
		what := fmt.Sprintf("group %s's committed offset %d in %s/%d", o.Group, o.Committed, o.Topic, o.QueueID)
		if rel == rmq.DelayOffsetFile {
			what = fmt.Sprintf("delay level %d's offset %d (%s/%d)", o.QueueID, o.Committed, o.Topic, o.QueueID-1)
		}
		out = append(out, scan.Finding{Code: CodeOffsetUnknown, Severity: scan.Warning, Path: o.File, Offset: o.Start, Length: o.End - o.Start,
			Repair: scan.RepairNone, Details: map[string]any{"topic": o.Topic, "group": o.Group, "queue_id": o.QueueID, "key": o.Key,
				"committed": o.Committed, "waits_on": []string{o.WaitsOn}},
			Message: what + " was not compared with the queue's max offset: " + o.WaitsOn + " could not be read, so whether messages are skipped is unknown"})
	}
	return out
}

// AboveMax returns the offsets of the offset table rel (as the broker
// loads it: the file or its .bak) that are above their queue's max
// offset after a recovery to end, those above what could be read of a
// queue whose walk reached a file it could not read (unknown: WaitsOn
// names the file), and how many offsets the table has.
func AboveMax(root, rel string, end int64, decode func([]byte) (rmq.OffsetTable, error)) (above, unknown []Offset, n int, err error) {
	var tab rmq.OffsetTable
	b, from, _, err := Load(root, rel, func(b []byte) error {
		var err error
		tab, err = decode(b)
		return err
	})
	if err != nil || b == nil {
		return nil, nil, 0, err
	}
	if end < 0 {
		end = 1<<63 - 1
	}
	type qmax struct {
		max   int64
		waits string // the file that could not be read: max unknown
	}
	maxes := map[string]qmax{}
	for _, o := range tab.Offsets {
		topic, qid := o.Topic, o.QueueID
		if rel == rmq.DelayOffsetFile {
			topic, qid = ScheduleTopic, o.QueueID-1 // delay level n is queue n-1
		}
		k := topic + "\x00" + strconv.Itoa(int(qid))
		m, ok := maxes[k]
		if !ok {
			q, err := cqueue.Open(root, topic, qid)
			if err != nil {
				return nil, nil, 0, err
			}
			_, m.max, err = q.Recovered(end)
			q.Close()
			var ue *cqueue.UnreadError
			if errors.As(err, &ue) {
				m.waits, err = ue.Rel, nil
			}
			if err != nil {
				return nil, nil, 0, err
			}
			maxes[k] = m
		}
		off := Offset{File: from, Key: o.Key, Topic: topic, Group: o.Group, QueueID: o.QueueID, Committed: o.Offset, Max: m.max, Start: o.Start, End: o.End}
		switch {
		case m.waits != "" && o.Offset > m.max:
			// m.max is what the walk read before the unread file: a
			// lower bound of the max, so only an offset above it is in
			// doubt.
			off.Max, off.WaitsOn = -1, m.waits
			unknown = append(unknown, off)
		case m.waits != "":
		case o.Offset > m.max:
			above = append(above, off)
		}
	}
	return above, unknown, len(tab.Offsets), nil
}

// checkJSON reports a config file that is empty or does not parse, and
// what the broker then loads.
func checkJSON(root, rel string, res *scan.Result) error {
	decode := func(b []byte) error { _, err := rmq.ParseFastJSON(b); return err }
	b, from, fileErr, err := Load(root, rel, decode)
	if err != nil {
		return err
	}
	st, serr := os.Stat(filepath.Join(root, filepath.FromSlash(rel)))
	if serr != nil {
		return serr
	}
	if fileErr == nil && st.Size() > 0 {
		return nil
	}
	var off int64
	var ce *format.CorruptError
	if errors.As(fileErr, &ce) {
		off = ce.Offset
	}
	code, what := CodeTorn, "does not parse"
	if st.Size() == 0 {
		code, what = CodeEmpty, "is empty"
	}
	switch {
	case b != nil:
		res.Add(scan.Finding{Code: code, Severity: scan.Warning, Path: rel, Offset: off, Repair: scan.RepairNone,
			Details: map[string]any{"error": errString(fileErr), "loaded_from": from},
			Message: fmt.Sprintf("%s %s (a rewrite cut short: the broker writes config files in place without fsync); the broker loads %s instead, which is one write older", rel, what, from)})
	default:
		msg := fmt.Sprintf("%s %s and %s%s is missing or empty: the broker starts with an empty table (for consumer offsets: every group restarts from its consume-from policy)", rel, what, rel, rmq.BakSuffix)
		if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(rel)) + rmq.BakSuffix); err == nil {
			msg = fmt.Sprintf("%s %s and %s%s does not parse either: ConfigManager.load fails and the broker does not start", rel, what, rel, rmq.BakSuffix)
		}
		res.Add(scan.Finding{Code: CodeBothBad, Severity: scan.Error, Path: rel, Offset: off, Repair: scan.RepairNone,
			Details: map[string]any{"error": errString(fileErr)}, Message: msg})
	}
	return nil
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
