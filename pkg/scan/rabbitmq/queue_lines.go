package rabbitmq

// Verify's queue lines. A broker can have tens of thousands of queues,
// and a scan.Queue with its at-risk maps costs several hundred bytes of
// heap (twice that in RSS, with the collector's headroom): held until the
// report is written, 40,000 queues cost 3-4 KiB each. Past queueSpillMin
// queues a run's lines are encoded as they are decided and spilled to an
// unlinked temp file, 16 bytes a queue in memory, and read back one at a
// time when the report writes them (spilledQueue.MarshalJSON).

import (
	"encoding/json"
	"fmt"

	"github.com/storectl/storectl/pkg/scan"
)

// queueSpillMin queue lines stay in memory; from the next one on, every
// line of the run is spilled. Tests lower it to spill every line.
var queueSpillMin = 1024

// queueLines collects one run's queue lines in order.
type queueLines struct {
	mem     []scan.Queue
	spill   *scan.Spill
	spilled []spilledQueue
	inMem   bool // the temp file failed: every line stays in memory
}

// spilledQueue is one line in the spill file: the JSON of its scan.Queue.
type spilledQueue struct {
	f   *scan.Spill
	off int64
	n   int64
}

// add appends q, spilling every line once there are more than
// queueSpillMin (the lines in memory go first). When the temp file cannot
// be used the lines stay in memory.
func (l *queueLines) add(q scan.Queue) error {
	if l.inMem || (l.spill == nil && len(l.mem) < queueSpillMin) {
		l.mem = append(l.mem, q)
		return nil
	}
	if l.spill == nil {
		l.spill = &scan.Spill{Pattern: "storectl-queues-*"}
	}
	for _, m := range l.mem {
		if !l.put(m) {
			break
		}
	}
	if !l.spill.Broken() {
		l.mem = l.mem[:0]
		l.put(q)
	}
	if l.spill.Broken() { // a write failed: back to memory, in order
		return l.unspill(q)
	}
	return nil
}

// put spills q; false when the file cannot be used.
func (l *queueLines) put(q scan.Queue) bool {
	b, err := json.Marshal(q)
	if err != nil {
		return false
	}
	off, ok := l.spill.Put(b)
	if ok {
		l.spilled = append(l.spilled, spilledQueue{f: l.spill, off: off, n: int64(len(b))})
	}
	return ok
}

// unspill reads every spilled line back into memory (the file failed),
// then appends q.
func (l *queueLines) unspill(q scan.Queue) error {
	var back []scan.Queue
	for i := range l.spilled {
		sq, err := l.spilled[i].queue()
		if err != nil {
			return err
		}
		back = append(back, sq)
	}
	l.mem = append(append(back, l.mem...), q)
	l.spilled = nil
	l.spill.Close()
	l.spill, l.inMem = nil, true
	return nil
}

// len is the number of lines.
func (l *queueLines) len() int { return len(l.mem) + len(l.spilled) }

// addTo puts the lines into res: in memory as res.Queues, spilled as
// res.QueueLines (spilledQueue values, which encode as the queue's line),
// and lets res close the file. A run whose earlier lines went to
// QueueLines puts these there too, so the lines stay in order.
func (l *queueLines) addTo(res *scan.Result) {
	if len(l.spilled) == 0 && len(res.QueueLines) == 0 {
		res.Queues = append(res.Queues, l.mem...)
		return
	}
	for i := range l.spilled {
		res.QueueLines = append(res.QueueLines, &l.spilled[i])
	}
	for _, q := range l.mem {
		res.QueueLines = append(res.QueueLines, q)
	}
	if l.spill != nil {
		res.OnClose(l.spill.Close)
	}
}

// queue reads the line back as a scan.Queue (the tests compare them).
func (s *spilledQueue) queue() (scan.Queue, error) {
	b, err := s.bytes()
	if err != nil {
		return scan.Queue{}, err
	}
	var w struct {
		scan.Queue
		DropMsgIDs   []string            `json:"drop_msg_ids"`
		AtRiskMsgIDs map[string][]string `json:"at_risk_msg_ids"`
	}
	if err := json.Unmarshal(b, &w); err != nil {
		return scan.Queue{}, fmt.Errorf("a queue line read back from the temp file: %w", err)
	}
	q := w.Queue
	q.DropMsgIDs = idList(w.DropMsgIDs)
	if w.AtRiskMsgIDs != nil {
		q.AtRiskMsgIDs = map[string]scan.MsgIDs{}
		for k, ids := range w.AtRiskMsgIDs {
			q.AtRiskMsgIDs[k] = idList(ids)
		}
	}
	return q, nil
}

func idList(hexIDs []string) scan.MsgIDs {
	var m scan.MsgIDs
	for _, h := range hexIDs {
		if id, ok := decodeID(h); ok {
			m.Append(id)
		}
	}
	return m
}

// bytes reads the line's JSON back.
func (s *spilledQueue) bytes() ([]byte, error) {
	b := make([]byte, s.n)
	if err := s.f.ReadAt(b, s.off, "a queue line"); err != nil {
		return nil, err
	}
	return b, nil
}

// MarshalJSON is the queue's line, read back from the temp file: what
// json.Marshal gives for its scan.Queue.
func (s *spilledQueue) MarshalJSON() ([]byte, error) { return s.bytes() }
