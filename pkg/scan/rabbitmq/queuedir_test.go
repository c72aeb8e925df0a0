package rabbitmq

import (
	"encoding/hex"
	"fmt"
	"path/filepath"
	"sort"
	"strconv"
	"testing"

	rfmt "github.com/storectl/storectl/pkg/format/rabbitmq"

	"github.com/storectl/storectl/internal/testutil"
	"github.com/storectl/storectl/pkg/format/etf"
)

type qxDump struct {
	MessageID string `json:"message_id"`
	Queue     string `json:"queue"`
	Size      uint32 `json:"size"`
}

type qxDecoded struct {
	MsgID string `json:"msg_id"`
	AMQP  string `json:"amqp_message_id"`
}

// qxEmbeddedMessage decodes the ETF of an embedded (v1) or per-queue-store
// (v2) message with the package's message extractor and returns its AMQP
// message-id and store id. A .qs blob may carry zero padding after the
// term (§5.2), so only the first term is decoded.
func qxEmbeddedMessage(body []byte) (amqpID string, storeID string, err error) {
	n, err := etf.SkipTerm(body)
	if err != nil {
		return "", "", err
	}
	if !allZeroBytes(body[n:]) {
		return "", "", fmt.Errorf("non-zero bytes after the term at %d", n)
	}
	m, err := rfmt.DecodeMessage(body[:n], 0)
	if err != nil {
		return "", "", err
	}
	if m.Properties == nil || m.Properties.MessageID == nil {
		return "", "", fmt.Errorf("no message-id property")
	}
	return *m.Properties.MessageID, hex.EncodeToString(m.ID), nil
}

// TestQueueDirOracle replays every queue dir of the fixtures and checks the
// entries a recovery keeps against what the restarted broker delivered
// (restart/dump.jsonl, in queue order) and counted (list_queues.tsv).
func TestQueueDirOracle(t *testing.T) {
	for _, ds := range qxDatasets {
		t.Run(ds.name, func(t *testing.T) {
			v, err := ReadVHostQueues(qxExtract(t, ds.tarball))
			if err != nil {
				t.Fatal(err)
			}
			if a := v.AllAnomalies(); len(a) != 0 {
				t.Errorf("anomalies on a healthy fixture: %v", a)
			}
			amqp := map[string]string{}
			for _, r := range testutil.ReadJSONL[qxDecoded](t, testutil.Testdata(ds.results+"/scan-decoded.jsonl")) {
				amqp[r.MsgID] = r.AMQP
			}
			dumps := map[string][]qxDump{}
			for _, d := range testutil.ReadJSONL[qxDump](t, testutil.Testdata(ds.results+"/restart/dump.jsonl")) {
				dumps[d.Queue] = append(dumps[d.Queue], d)
			}
			counts := map[string]int{}
			for _, row := range qxTSV(t, ds.results+"/restart/list_queues.tsv")[1:] {
				n, _ := strconv.Atoi(row[1])
				counts[row[0]] = n
			}
			if len(v.Queues) != len(counts) {
				t.Errorf("%d queue dirs, broker has %d queues", len(v.Queues), len(counts))
			}
			total, embedded := 0, 0
			for _, q := range v.Queues {
				n, e := qxCheckQueue(t, q, amqp, dumps[q.Name.Name], counts[q.Name.Name])
				total, embedded = total+n, embedded+e
			}
			t.Logf("%d entries compared with the broker dump (%d of them embedded / in .qs)", total, embedded)
			qxCheckRefs(t, v, amqp, dumps)
			if ds.v4 {
				qxCheckQIRefs(t, v, ds.results+"/qi-refs.tsv")
			}
		})
	}
}

// qxCheckQueue compares one queue; it returns entries compared and how many
// of them carried their message in the index / .qs.
func qxCheckQueue(t *testing.T, q *QueueDir, amqp map[string]string, dump []qxDump, count int) (int, int) {
	t.Helper()
	if !q.HasName {
		t.Errorf("%s: no .queue_name", q.Hash)
		return 0, 0
	}
	var want []QueueEntry
	for _, e := range q.Kept() {
		// A shared-store message no .rdq holds is dropped by the store
		// check of a dirty recovery (§4.3 step 5, "A").
		if e.Location == LocationSharedStore && amqp[e.MsgID] == "" {
			t.Logf("%s: seq %d msg %s not in any .rdq: dropped at recovery", q.Name.Name, e.SeqID, e.MsgID)
			continue
		}
		want = append(want, e)
	}
	if len(want) != count || len(dump) != count {
		t.Errorf("%s: %d entries kept, list_queues %d, dump %d", q.Name.Name, len(want), count, len(dump))
	}
	embedded := 0
	for i := 0; i < len(want) && i < len(dump); i++ {
		e, d := want[i], dump[i]
		if e.Size != d.Size {
			t.Errorf("%s #%d seq %d: size %d, broker delivered %d bytes (%s)", q.Name.Name, i, e.SeqID, e.Size, d.Size, d.MessageID)
		}
		switch e.Location {
		case LocationSharedStore:
			if amqp[e.MsgID] != d.MessageID {
				t.Errorf("%s #%d seq %d: store msg %s is %s, broker delivered %s", q.Name.Name, i, e.SeqID, e.MsgID, amqp[e.MsgID], d.MessageID)
			}
		case LocationEmbedded, LocationQueueStore:
			embedded++
			if len(e.Body) == 0 || e.Body[0] != 131 {
				t.Errorf("%s seq %d: body is not ETF", q.Name.Name, e.SeqID)
			}
			id, storeID, err := qxEmbeddedMessage(e.Body)
			if err != nil || id != d.MessageID {
				t.Errorf("%s seq %d: embedded message-id %q (%v), broker delivered %s", q.Name.Name, e.SeqID, id, err, d.MessageID)
			}
			// v1 publishes carry the id next to the embedded message and it
			// must match the message's own (§5.3); v2 .qi slots have none.
			if e.Location == LocationEmbedded && storeID != e.MsgID {
				t.Errorf("%s seq %d: index msg id %s, embedded message id %s", q.Name.Name, e.SeqID, e.MsgID, storeID)
			}
		default:
			t.Errorf("%s seq %d: kept entry at %v", q.Name.Name, e.SeqID, e.Location)
		}
	}
	return min(len(want), len(dump)), embedded
}

// qxCheckRefs checks the walker's ref counts: every message the broker
// delivered from the shared store is referenced once per queue holding it.
func qxCheckRefs(t *testing.T, v *VHostQueues, amqp map[string]string, dumps map[string][]qxDump) {
	t.Helper()
	queues := map[string]int{} // AMQP id -> queues that delivered it
	for _, ds := range dumps {
		for _, d := range ds {
			queues[d.MessageID]++
		}
	}
	stored := 0
	for id, n := range v.RefCounts {
		a, ok := amqp[id]
		if !ok {
			continue // not in any .rdq (torn tail)
		}
		stored++
		if queues[a] != n {
			t.Errorf("msg %s (%s): %d refs, delivered by %d queues", id, a, n, queues[a])
		}
	}
	delivered := 0
	for _, a := range amqp {
		if queues[a] > 0 {
			delivered++
		}
	}
	if stored != delivered {
		t.Errorf("%d referenced stored messages, broker delivered %d stored messages", stored, delivered)
	}
}

// qxCheckQIRefs compares the refs with qi-refs.tsv (queue dir, segment
// file, slot, msg id) exactly.
func qxCheckQIRefs(t *testing.T, v *VHostQueues, path string) {
	t.Helper()
	var want, got []string
	for _, row := range qxTSV(t, path) {
		want = append(want, fmt.Sprintf("%s %s %s %s", row[0], row[1], row[2], row[3]))
	}
	for _, q := range v.Queues {
		for _, r := range q.Refs {
			got = append(got, fmt.Sprintf("%s %s %d %s", q.Hash, filepath.Base(r.Path), r.Slot, r.MsgID))
		}
	}
	sort.Strings(want)
	sort.Strings(got)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("refs differ from qi-refs.tsv: got %d, want %d", len(got), len(want))
		for i := 0; i < len(got) || i < len(want); i++ {
			if i >= len(got) || i >= len(want) || got[i] != want[i] {
				t.Errorf("first difference at %d", i)
				break
			}
		}
	}
	t.Logf("%d refs equal qi-refs.tsv", len(got))
}

// allZeroBytes reports whether every byte of b is zero.
func allZeroBytes(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}
