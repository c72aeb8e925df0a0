package report

import (
	"bytes"
	"encoding/json"
	"io"
	"runtime"
	"testing"

	"github.com/storectl/storectl/pkg/scan"
)

func queueTestID(i int) [16]byte {
	var id [16]byte
	for j := range id {
		id[j] = byte(i*31 + j*7 + i>>8)
	}
	return id
}

// queueIDs returns n ids from from on, spilled to sp in chunks (sp nil:
// kept in memory).
func queueIDs(sp *scan.IDSpool, from, n int) scan.MsgIDs {
	var l scan.MsgIDs
	for i := range n {
		l.AppendTo(sp, queueTestID(from+i))
	}
	return l
}

// TestQueueLineStreamed: the jsonl emitter's streamed queue line is
// byte for byte the line it marshals (e.line), for queues with no lists,
// either list, both, keys that need escaping, and lists held in memory or
// spilled across many chunks; the text emitter's queue row has the
// counts and no id lists.
func TestQueueLineStreamed(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir())
	sp := scan.NewIDSpool(64)
	base := scan.Queue{VHost: "/", Queue: "q<1>&\"", Dir: "ABC", Index: "v2", Entries: 7, Keep: 5, Drop: 2,
		AtRisk: map[string]int{"3.10.0-3.13.0": 3, "4.0.0-4.0.3": 1}}
	cases := map[string]scan.Queue{}
	cases["none"] = base
	q := base
	q.DropMsgIDs = queueIDs(nil, 0, 3)
	cases["drop in memory"] = q
	q = base
	q.AtRiskMsgIDs = map[string]scan.MsgIDs{"z": queueIDs(sp, 10, 1), "\u2028<é>": queueIDs(sp, 20, 130), "a": {}}
	cases["at risk, odd keys, one empty"] = q
	q = base
	q.DropMsgIDs = queueIDs(sp, 1000, 5000)
	q.AtRiskMsgIDs = map[string]scan.MsgIDs{"3.10.0-3.13.0": queueIDs(sp, 9000, 2000), "4.0.0-4.0.3": queueIDs(nil, 20000, 40)}
	cases["both, spilled"] = q
	for name, q := range cases {
		var streamed, marshalled bytes.Buffer
		e := newJSONL(&streamed)
		if err := e.Queue(q); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		e.w.Flush()
		m := newJSONL(&marshalled)
		if err := m.line("queue", q); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		m.w.Flush()
		if streamed.String() != marshalled.String() {
			t.Fatalf("%s: streamed line differs:\n%.300s\nmarshalled:\n%.300s", name, streamed.String(), marshalled.String())
		}
		var back map[string]any
		if err := json.Unmarshal(streamed.Bytes(), &back); err != nil || back["type"] != "queue" {
			t.Fatalf("%s: line does not parse as a queue: %v", name, err)
		}
		// The pointer form writes the same line.
		var byPtr bytes.Buffer
		p := newJSONL(&byPtr)
		if err := p.Queue(&q); err != nil {
			t.Fatal(err)
		}
		p.w.Flush()
		if byPtr.String() != streamed.String() {
			t.Errorf("%s: *scan.Queue gives another line", name)
		}

		te := &textEmitter{}
		if err := te.Queue(q); err != nil {
			t.Fatal(err)
		}
		row := te.queues[len(te.queues)-1]
		if _, has := row["drop_msg_ids"]; has {
			t.Errorf("%s: text row holds drop_msg_ids", name)
		}
		if _, has := row["at_risk_msg_ids"]; has {
			t.Errorf("%s: text row holds at_risk_msg_ids", name)
		}
		if row["keep"] != float64(5) || row["queue"] != q.Queue {
			t.Errorf("%s: text row %v", name, row)
		}
	}
}

// TestQueueLineMemory: writing the line of a queue that names 200,000
// spilled ids (a 7 MB line) allocates a small, fixed amount, not a
// multiple of the line: the lists go from the spool to the output in
// chunks. Marshalling the same line allocates more than the line itself,
// which shows the measure can fail.
func TestQueueLineMemory(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir())
	sp := scan.NewIDSpool(4096)
	q := scan.Queue{Queue: "big", AtRisk: map[string]int{}}
	q.DropMsgIDs = queueIDs(sp, 0, 200000)
	q.AtRiskMsgIDs = map[string]scan.MsgIDs{"3.10.0-3.13.0": queueIDs(sp, 0, 100000)}
	const line = 300000 * 35
	alloc := func(write func(e *jsonlEmitter) error) uint64 {
		e := newJSONL(io.Discard)
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		if err := write(e); err != nil {
			t.Fatal(err)
		}
		runtime.ReadMemStats(&after)
		return after.TotalAlloc - before.TotalAlloc
	}
	streamed := alloc(func(e *jsonlEmitter) error { return e.Queue(q) })
	marshalled := alloc(func(e *jsonlEmitter) error { return e.line("queue", q) })
	t.Logf("line %d bytes: streamed %d bytes allocated, marshalled %d", line, streamed, marshalled)
	if streamed > 1<<20 {
		t.Errorf("streaming a %d-byte line allocated %d bytes", line, streamed)
	}
	if marshalled < line {
		t.Errorf("marshalling allocated %d bytes, less than the %d-byte line", marshalled, line)
	}
}
