// Package quorum plans the repairs of RabbitMQ quorum queue files: cutting
// a ra WAL at a record ra refuses, so that the node's quorum queues start
// again (truncate).
package quorum

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/storectl/storectl/pkg/format/ra"
	"github.com/storectl/storectl/pkg/repair"
	"github.com/storectl/storectl/pkg/scan"
	qscan "github.com/storectl/storectl/pkg/scan/quorum"
)

// Config says what to plan for.
type Config struct {
	Scan        qscan.Config
	ToolVersion string
}

// Report is what truncate found and plans, per WAL and per queue.
type Report struct {
	Scan *scan.Result `json:"-"`
	WALs []WALCut     `json:"wals"`
	// Queues lists per queue replica the log entries the plan drops.
	Queues []QueueLoss `json:"queues"`
	// OnlyCopy names the queues whose dropped entries this node's files
	// say nowhere else holds (a single-member queue): applying needs
	// --force.
	OnlyCopy []string `json:"only_copy"`
	Warning  string   `json:"warning,omitempty"`
}

// Scanned is the scan the plan came from.
func (r *Report) Scanned() *scan.Result { return r.Scan }

// ForceReason says why applying needs --force ("" when it does not).
func (r *Report) ForceReason() string {
	if len(r.OnlyCopy) == 0 {
		return ""
	}
	return fmt.Sprintf("the plan drops log entries of %s, which these files say no other node holds (single-member queues): nothing was written; re-run with --force to drop them",
		strings.Join(r.OnlyCopy, ", "))
}

// WALCut is one WAL change.
type WALCut struct {
	Path   string `json:"path"`
	Op     string `json:"op"`   // truncate-file, write-range, replace-file
	From   int64  `json:"from"` // file size before
	To     int64  `json:"to"`   // size after
	Reason string `json:"reason"`
}

// QueueLoss is what the plan drops of one replica's log.
type QueueLoss struct {
	VHost string `json:"vhost"`
	Queue string `json:"queue"`
	UID   string `json:"uid"`
	// Entries and Indexes: the log entries dropped, as index ranges.
	Entries int         `json:"entries"`
	Indexes [][2]uint64 `json:"indexes"`
	Members []string    `json:"members"`
	// KeepAfter is what the queue holds at its next start once the plan
	// is applied (the prediction over the cut log); -1 when it cannot
	// start then either.
	KeepAfter int `json:"keep_after"`
	// Messages are the enqueues among the dropped entries (AMQP
	// message-ids, else "index N").
	Messages []string `json:"messages"`
}

// PlanTruncate adds to plan (nil: a new plan) the WAL cuts that let every
// ra system of the scanned dirs start: a record ra refuses (a bad
// checksum before the last record, an unknown writer) is cut with what
// follows it; a torn or bad last record, which ra drops itself, is cut
// too; a WAL whose header is damaged gets its header back (or, empty,
// one). When a cut drops a queue's entries and a later WAL holds later
// entries of the same queue, that WAL is cut at them too, so that no
// queue's log has a gap.
func PlanTruncate(ctx context.Context, cfg Config, plan *repair.Plan) (*repair.Plan, *Report, error) {
	res, err := qscan.Scan(ctx, cfg.Scan, scan.Options{})
	if err != nil {
		return nil, nil, err
	}
	if plan == nil {
		if plan, err = repair.NewPlan(cfg.Scan.Root, cfg.ToolVersion, time.Now()); err != nil {
			return nil, nil, err
		}
	}
	rep := &Report{Scan: res.Result, WALs: []WALCut{}, Queues: []QueueLoss{}, OnlyCopy: []string{}}
	for _, s := range res.Systems {
		if err := planSystem(s, plan, rep); err != nil {
			return nil, nil, err
		}
	}
	// what each queue holds at the next start once the cuts are applied
	ends := map[string]int64{}
	for _, s := range res.Systems {
		for _, w := range s.WALs {
			for _, c := range rep.WALs {
				if c.Path == w.Rel && c.Op == string(repair.OpTruncateFile) {
					ends[w.Path] = c.To
				}
			}
		}
	}
	if len(rep.Queues) > 0 {
		after := cfg.Scan
		after.Replay, after.WALEnds = true, ends
		ar, err := qscan.Scan(ctx, after, scan.Options{})
		if err != nil {
			return nil, nil, err
		}
		for i := range rep.Queues {
			rep.Queues[i].KeepAfter = -1
			for _, q := range ar.Queues {
				if q.UID == rep.Queues[i].UID {
					rep.Queues[i].KeepAfter = q.Keep
				}
			}
		}
	}
	if len(rep.Queues) > 0 {
		rep.Warning = "on a cluster, the dropped entries come back from the other members only if a majority of the queue's members still has them; a queue with one member loses them"
	}
	return plan, rep, nil
}

// walRec is what the planner keeps of a record.
type walRec struct {
	off, end   int64
	uid        string
	index      uint64
	data       []byte
	checksumOK bool
	unknownRef bool
}

func planSystem(s *qscan.System, plan *repair.Plan, rep *Report) error {
	affected := map[string]bool{} // UIds whose later entries must go too
	lost := map[string][]uint64{}
	var msgs = map[string][]string{}
	for _, w := range s.WALs {
		b, err := readRegular(w.Path)
		if err != nil {
			return fmt.Errorf("%s: %w", w.Rel, err)
		}
		size := int64(len(b))
		fixHeader := false
		if size < ra.WALHeaderLen || ra.DecodeWALHeader(b) != nil {
			fixHeader = true
			if size < ra.WALHeaderLen {
				// an empty or short WAL: give it a header
				if err := plan.Add(repair.Action{Op: repair.OpReplaceFile, Path: w.Rel, NewSize: ra.WALHeaderLen, Data: ra.AppendWALHeader(nil),
					Reason: qscan.Code(s.System, qscan.CodeWALEmpty), Lost: repair.Loss{Note: fmt.Sprintf("%s: %d bytes, no record; replaced by an empty WAL (the 5-byte header)", w.Rel, size)}}, repair.SnapshotOptions{}); err != nil {
					return err
				}
				rep.WALs = append(rep.WALs, WALCut{Path: w.Rel, Op: string(repair.OpReplaceFile), From: size, To: ra.WALHeaderLen, Reason: "empty WAL"})
				continue
			}
			b = append(ra.AppendWALHeader(nil), b[ra.WALHeaderLen:]...)
		}
		recs, end := walRecords(b)
		cut := int64(-1)
		why := ""
		for i, r := range recs {
			if affected[r.uid] {
				cut, why = r.off, fmt.Sprintf("the first record of a queue whose earlier entries an earlier cut dropped (%s)", r.uid)
				break
			}
			if r.unknownRef {
				cut, why = r.off, "a record of a writer this WAL never defined"
				break
			}
			if !r.checksumOK {
				last := i == len(recs)-1 && ra.IsLastWALRecord(b[r.end:min(len(b), int(r.end)+13)])
				cut = r.off
				if last {
					why = "the last record fails its checksum (ra drops it itself)"
				} else {
					why = "a record fails its checksum before the last one: ra refuses the WAL"
				}
				break
			}
		}
		if cut < 0 && end != size && end >= 0 && !zeroTail(b[end:]) {
			cut, why = end, "a record cut short by the end of the file (ra drops it itself)"
		}
		if fixHeader {
			if err := plan.Add(repair.Action{Op: repair.OpWriteRange, Path: w.Rel, Offset: 0, Length: ra.WALHeaderLen, Data: ra.AppendWALHeader(nil),
				Reason: qscan.Code(s.System, qscan.CodeWALBadHeader), Lost: repair.Loss{Note: fmt.Sprintf("%s: the 5-byte header is not RAWA version 1; it is written back so ra reads the records after it", w.Rel)}}, repair.SnapshotOptions{}); err != nil {
				return err
			}
			rep.WALs = append(rep.WALs, WALCut{Path: w.Rel, Op: string(repair.OpWriteRange), From: size, To: size, Reason: "damaged header"})
		}
		if cut < 0 {
			continue
		}
		var dropped []walRec
		for _, r := range recs {
			if r.off >= cut {
				dropped = append(dropped, r)
			}
		}
		n := 0
		here := map[string][]uint64{}
		enq := map[string]int{}
		for _, r := range dropped {
			if r.uid == "" {
				continue
			}
			n++
			affected[r.uid] = true
			lost[r.uid] = append(lost[r.uid], r.index)
			here[r.uid] = append(here[r.uid], r.index)
			if id, ok := enqueueName(r); ok {
				msgs[r.uid] = append(msgs[r.uid], id)
				enq[r.uid]++
			}
		}
		var per []string
		for _, u := range sortedKeys(here) {
			rs := ranges(dedupe(here[u]))
			var parts []string
			for _, r := range rs {
				parts = append(parts, fmt.Sprintf("%d-%d", r[0], r[1]))
			}
			per = append(per, fmt.Sprintf("%s: %d entries (indexes %s, %d enqueues; %s)", queueName(s, u), len(here[u]), strings.Join(parts, ", "), enq[u], membersNote(s, u)))
		}
		note := fmt.Sprintf("cut %s at %d (%d bytes, %d records): %s; drops %s", w.Rel, cut, size-cut, n, why, strings.Join(per, "; "))
		if err := plan.Add(repair.Action{Op: repair.OpTruncateFile, Path: w.Rel, NewSize: cut, Reason: reasonFor(s, why),
			Lost: repair.Loss{Records: int64(n), Note: note}}, repair.SnapshotOptions{}); err != nil {
			return err
		}
		rep.WALs = append(rep.WALs, WALCut{Path: w.Rel, Op: string(repair.OpTruncateFile), From: size, To: cut, Reason: why})
	}
	uids := make([]string, 0, len(lost))
	for u := range lost {
		uids = append(uids, u)
	}
	sort.Strings(uids)
	for _, u := range uids {
		idx := dedupe(lost[u])
		ql := QueueLoss{UID: u, Entries: len(idx), Indexes: ranges(idx), Members: []string{}, Messages: msgs[u]}
		if ql.Messages == nil {
			ql.Messages = []string{}
		}
		for _, r := range s.Replicas {
			if r.UID != u || r.Config == nil {
				continue
			}
			ql.VHost, ql.Queue = r.Config.VHost, r.Config.Queue
			for _, m := range r.Config.InitialMembers {
				ql.Members = append(ql.Members, m.String())
			}
		}
		if ql.Queue == "" {
			ql.Queue = u
		}
		if len(ql.Members) <= 1 && s.System == qscan.SystemQuorum {
			rep.OnlyCopy = append(rep.OnlyCopy, ql.Queue)
		}
		rep.Queues = append(rep.Queues, ql)
	}
	return nil
}

// membersNote says where else a queue's dropped entries may be.
func membersNote(s *qscan.System, uid string) string {
	for _, r := range s.Replicas {
		if r.UID == uid && r.Config != nil {
			if n := len(r.Config.InitialMembers); n > 1 {
				return fmt.Sprintf("%d members: the entries come back from the others only if a majority of them still has them", n)
			}
			return "one member: this node holds the only copy, applying needs --force"
		}
	}
	return "members unknown (no config)"
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func queueName(s *qscan.System, uid string) string {
	for _, r := range s.Replicas {
		if r.UID == uid {
			return r.Name()
		}
	}
	return uid
}

func reasonFor(s *qscan.System, why string) string {
	switch {
	case strings.Contains(why, "ra refuses"):
		return qscan.Code(s.System, qscan.CodeWALChecksum)
	case strings.Contains(why, "ra drops it itself") && strings.Contains(why, "checksum"):
		return qscan.Code(s.System, qscan.CodeWALChecksumLast)
	case strings.Contains(why, "never defined"):
		return qscan.Code(s.System, qscan.CodeWALUnknownWriter)
	case strings.Contains(why, "cut short"):
		return qscan.Code(s.System, qscan.CodeWALTornTail)
	}
	return qscan.Code(s.System, qscan.CodeWALChecksum)
}

// walRecords reads the records of a WAL (with a valid header) and where
// the data ends (-1 on an error).
func walRecords(b []byte) ([]walRec, int64) {
	rd := ra.NewWALReader(bytes.NewReader(b), int64(len(b)))
	var out []walRec
	for rd.Next() {
		r := rd.Record()
		d := r.Offset + int64(r.HeaderLen)
		out = append(out, walRec{off: r.Offset, end: r.End(), uid: string(r.UID), index: r.Index,
			data: b[d : d+int64(r.DataLen)], checksumOK: r.ChecksumOK(), unknownRef: r.UID == nil})
	}
	if rd.Err() != nil {
		return out, -1
	}
	_, end := rd.End()
	return out, end
}

func zeroTail(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// enqueueName names the message an enqueue record carries.
func enqueueName(r walRec) (string, bool) {
	e, err := ra.DecodeEntry(r.data, 0)
	if err != nil || e.Kind != ra.EntryUser {
		return "", false
	}
	c := ra.DecodeFifoCommand(e.Command, e.ReplyMode)
	if c.Msg == nil {
		return "", false
	}
	m, err := ra.DecodeEnqueueMessage(c.Msg)
	if err == nil && m.Properties != nil && m.Properties.MessageID != nil {
		return *m.Properties.MessageID, true
	}
	return fmt.Sprintf("index %d", r.index), true
}

// ranges compresses sorted indexes into [first, last] runs.
func ranges(xs []uint64) [][2]uint64 {
	out := [][2]uint64{}
	for _, x := range xs {
		if n := len(out); n > 0 && out[n-1][1]+1 == x {
			out[n-1][1] = x
			continue
		}
		out = append(out, [2]uint64{x, x})
	}
	return out
}

func dedupe(xs []uint64) []uint64 {
	sort.Slice(xs, func(i, j int) bool { return xs[i] < xs[j] })
	out := xs[:0]
	for i, x := range xs {
		if i == 0 || x != xs[i-1] {
			out = append(out, x)
		}
	}
	return out
}

func readRegular(p string) ([]byte, error) {
	st, err := os.Lstat(p)
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, errors.New("not a regular file")
	}
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}
