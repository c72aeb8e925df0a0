package report

// RabbitMQ verify's queue lines. A queue's drop_msg_ids and
// at_risk_msg_ids can name every message it holds (35 bytes each in
// JSON: 3 MB a line for a queue of 84,000 messages). Marshalled, such a
// line was built three times over (the list's own encoding, encoding/json
// compacting it into its buffer, that buffer kept for the next line), so
// verify's memory grew with the largest queue. The jsonl emitter streams
// the lists instead (writeQueue) and the text emitter, which shows only
// the counts, leaves them out (queueCounts).

import (
	"maps"
	"slices"

	"github.com/storectl/storectl/pkg/scan"
)

// asQueue returns q as a *scan.Queue, if it is one.
func asQueue(q any) (*scan.Queue, bool) {
	switch x := q.(type) {
	case scan.Queue:
		return &x, true
	case *scan.Queue:
		return x, x != nil
	}
	return nil, false
}

// queueCounts is q without its id lists.
func queueCounts(q *scan.Queue) scan.Queue {
	c := *q
	c.DropMsgIDs, c.AtRiskMsgIDs = scan.MsgIDs{}, nil
	return c
}

// writeQueue writes q's jsonl line: the bytes e.line("queue", q) writes,
// with the id lists streamed from their spool. The lists are read back
// once before anything is written, so a list that cannot be read back is
// an error with nothing written, as it is for a marshalled line.
func (e *jsonlEmitter) writeQueue(q *scan.Queue) error {
	lists := []scan.MsgIDs{q.DropMsgIDs}
	keys := slices.Sorted(maps.Keys(q.AtRiskMsgIDs))
	for _, k := range keys {
		lists = append(lists, q.AtRiskMsgIDs[k])
	}
	for _, l := range lists {
		if err := l.Each(func([16]byte) {}); err != nil {
			return err
		}
	}
	// Both lists come last in scan.Queue and are omitted when empty, so
	// they follow the counts' fields.
	if err := e.begin("queue", queueCounts(q)); err != nil {
		return err
	}
	if !q.DropMsgIDs.IsZero() {
		e.w.WriteString(`,"drop_msg_ids":`)
		if err := q.DropMsgIDs.WriteJSON(e.w); err != nil {
			return err
		}
	}
	if len(keys) > 0 {
		e.w.WriteString(`,"at_risk_msg_ids":{`)
		for i, k := range keys {
			if i > 0 {
				e.w.WriteByte(',')
			}
			e.w.Write(append(appendJSONString(nil, k), ':'))
			if err := q.AtRiskMsgIDs[k].WriteJSON(e.w); err != nil {
				return err
			}
		}
		e.w.WriteByte('}')
	}
	_, err := e.w.WriteString("}\n")
	return err
}
