package rocketmq

import (
	"context"
	"fmt"
	"math"

	"github.com/storectl/storectl/internal/fileview"
	rmq "github.com/storectl/storectl/pkg/format/rocketmq"
	"github.com/storectl/storectl/pkg/scan"
)

// The cross-file checks of the commitlog walk: a queue offset going
// backwards in its (topic, queue) and a store timestamp going back by more
// than the slack. They depend on every record before, in all earlier
// files, while files are walked in parallel. Keeping each file's records
// until its predecessors are done would make memory grow with the records
// of a file (160 MB for a 1 GiB file of small messages), so each file is
// checked as it is walked as if nothing came before it (crossFile), and
// what that assumed is kept: per queue, the first record and the state
// after the last; the file's oldest store time. When the files before it
// are done (crossState.done, in file order), that summary says whether
// the assumption changed anything (crossFile.exact). It does not when the
// queues carry on from where the earlier files left them and no store
// time goes back past the slack — every healthy store; the file's
// findings then stand. Otherwise the file is walked again with the real
// state of the earlier files (recheck), which only damaged files pay for.

// crossQueue is one (topic, queue) of a file: the state of the offset
// check (next, seen: as next[k] = max(next[k], offset + inner count),
// with an absent key read as 0 and only stored when that exceeds it) and
// the file's first dispatched record of the queue.
type crossQueue struct {
	k                    queueKey
	next                 int64
	seen                 bool
	firstOff, firstInner int64
	init                 bool // the queue's state came from the earlier files (recheck)
}

// crossFile runs the cross-file checks over one file's valid records, in
// order, from a given starting state.
type crossFile struct {
	slack    int64
	maxTS    int64
	minTS    int64 // oldest store time of the file's valid records
	byID     map[uint64]*crossQueue
	order    []*crossQueue
	intern   topicIDs
	topics   []string
	dense    [][]*crossQueue              // [topic id][queue id] for queue ids below denseQueues (the usual case)
	start    func(queueKey) (int64, bool) // a queue's state before the file; nil: unseen
	findings []scan.Finding
	seg      *segment
}

func newCrossFile(cfg *Config, seg *segment, maxTS int64, start func(queueKey) (int64, bool)) *crossFile {
	return &crossFile{slack: cfg.TimestampSlack.Milliseconds(), maxTS: maxTS, minTS: math.MaxInt64,
		byID: map[uint64]*crossQueue{}, intern: topicIDs{ids: map[string]int32{}}, start: start, seg: seg}
}

// record checks the valid record m at pos of the file.
func (c *crossFile) record(m *rmq.Message, pos int64) {
	if m.Dispatched() {
		tid, added := c.intern.id(m.Topic)
		if added {
			c.topics = append(c.topics, c.intern.names[tid])
			c.dense = append(c.dense, nil)
		}
		inner := m.InnerNum()
		q := c.queue(tid, m.QueueID)
		if q == nil {
			q = &crossQueue{k: queueKey{c.topics[tid], m.QueueID}, firstOff: m.QueueOffset, firstInner: inner}
			if c.start != nil {
				q.next, q.seen = c.start(q.k)
				q.init = true
			}
			c.setQueue(tid, m.QueueID, q)
			c.order = append(c.order, q)
		}
		if want := q.next; q.seen && m.QueueOffset < want {
			c.findings = append(c.findings, c.regress(m, pos, CodeQueueRegress, "queue-offset-regress", fmtInt(want), fmtInt(m.QueueOffset),
				fmt.Sprintf("queue offset of %s/%d goes backwards (expected at least %d)", q.k.topic, q.k.queueID, want),
				map[string]any{"topic": q.k.topic, "queue_id": q.k.queueID}))
		}
		if n := m.QueueOffset + inner; q.seen {
			q.next = max(q.next, n)
		} else if n > 0 {
			q.next, q.seen = n, true
		}
	}
	ts := m.StoreTimestamp
	if c.maxTS-ts > c.slack {
		c.findings = append(c.findings, c.regress(m, pos, CodeTimestampRegress, "timestamp-regress", ">= "+fmtInt(c.maxTS-c.slack), fmtInt(ts),
			fmt.Sprintf("store timestamp goes back %d ms from the newest earlier record", c.maxTS-ts),
			map[string]any{"topic": string(m.Topic), "queue_id": m.QueueID}))
	}
	c.maxTS = max(c.maxTS, ts)
	c.minTS = min(c.minTS, ts)
}

func (c *crossFile) regress(m *rmq.Message, pos int64, code, check, exp, act, msg string, det map[string]any) scan.Finding {
	det["phy_offset"] = c.seg.base + pos
	det["queue_offset"] = m.QueueOffset
	det["store_timestamp"] = m.StoreTimestamp
	return scan.Finding{Code: code, Severity: scan.Warning, Path: c.seg.rel, Offset: pos,
		Expected: exp, Actual: act, Repair: scan.RepairNone, Message: msg, Details: det,
		Evidence: map[string]string{check: "fail"}}
}

// exact reports whether c, walked from nothing, found what a walk from
// the earlier files' state (next, maxTS) would have. A queue the earlier
// files left at next P: the walks agree from its first record r on iff r
// is not behind (offset >= P) and moves the state to at least P (offset
// + inner count >= P), since both then hold the same state after r. The
// store times agree iff no record is more than the slack older than
// maxTS: a record newer than everything before it in the file compares
// with the larger of the two maxima, and every such record is at least
// minTS.
func (c *crossFile) exact(next map[queueKey]int64, maxTS int64) bool {
	if c.minTS != math.MaxInt64 && maxTS-c.minTS > c.slack {
		return false
	}
	for _, q := range c.order {
		if p, seen := next[q.k]; seen && (q.firstOff < p || q.firstOff+q.firstInner < p) {
			return false
		}
	}
	return true
}

// carry writes the queue states the file ends with into next and returns
// the newest store time so far.
func (c *crossFile) carry(next map[queueKey]int64, maxTS int64) int64 {
	for _, q := range c.order {
		if q.seen {
			next[q.k] = q.next
		}
	}
	return max(maxTS, c.maxTS)
}

// recheck walks the valid records of a file again (the primary walk's,
// [0, end)), checking them from the real state of the earlier files.
func recheck(ctx context.Context, cfg *Config, seg *segment, end int64, next map[queueKey]int64, maxTS int64) (*crossFile, error) {
	c := newCrossFile(cfg, seg, maxTS, func(k queueKey) (int64, bool) { v, ok := next[k]; return v, ok })
	f, err := fileview.Open(seg.path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	defer fileview.Guard(&err)()
	r := rmq.NewReader(ctxReaderAt{ctx, f}, f.Size(), seg.base, cfg.MaxMessageSize)
	for r.Next() && r.Offset() < end {
		c.record(r.Message(), r.Offset())
	}
	if r.End() == rmq.EndIO {
		return nil, r.Err()
	}
	return c, nil
}

// denseQueues bounds the queue ids kept in the per-topic slices; larger
// ones (a hostile or odd store) go to the map.
const denseQueues = 1024

func (c *crossFile) queue(tid, qid int32) *crossQueue {
	if qid >= 0 && qid < denseQueues {
		if d := c.dense[tid]; int(qid) < len(d) {
			return d[qid]
		}
		return nil
	}
	return c.byID[uint64(uint32(tid))<<32|uint64(uint32(qid))]
}

func (c *crossFile) setQueue(tid, qid int32, q *crossQueue) {
	if qid >= 0 && qid < denseQueues {
		d := c.dense[tid]
		for int(qid) >= len(d) {
			d = append(d, nil)
		}
		d[qid] = q
		c.dense[tid] = d
		return
	}
	c.byID[uint64(uint32(tid))<<32|uint64(uint32(qid))] = q
}

// topicIDs numbers topics as they come: a small table of recent ones,
// placed by a hash of the name's length and three of its bytes, is
// compared byte for byte before the map is asked (a file's records cycle
// through few topics, and one compare is cheaper than hashing the name;
// a ring of four had missed on five interleaved topics).
type topicIDs struct {
	ids    map[string]int32
	names  []string // by id
	recent [topicRecent]struct {
		name string
		id   int32
	}
}

const topicRecent = 64 // a power of two

// id returns the id of topic (added says it is new).
func (t *topicIDs) id(topic []byte) (id int32, added bool) {
	var h uint
	if n := len(topic); n > 0 {
		h = uint(n)*7 ^ uint(topic[0])*3 ^ uint(topic[n-1])*5 ^ uint(topic[n/2])
	}
	r := &t.recent[h%topicRecent]
	if r.name == string(topic) && r.name != "" {
		return r.id, false
	}
	id, ok := t.ids[string(topic)]
	if !ok {
		id = int32(len(t.names))
		t.names = append(t.names, string(topic))
		t.ids[t.names[id]] = id
	}
	r.name, r.id = t.names[id], id
	return id, !ok
}
