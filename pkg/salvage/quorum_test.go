package salvage

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/storectl/storectl/internal/testutil"
	qscan "github.com/storectl/storectl/pkg/scan/quorum"
)

// qqDump is a line of a restarted broker's restart/dump-<queue>.jsonl.
type qqDump struct {
	MessageID     string `json:"message_id"`
	SHA256        string `json:"sha256"`
	Size          int64  `json:"size"`
	Timestamp     int64  `json:"timestamp"`
	ContentType   string `json:"content_type"`
	CorrelationID string `json:"correlation_id"`
	DeliveryMode  int    `json:"delivery_mode"`
}

type qqSet struct {
	name, node, results string
	queues              []string
}

// qqSalvageSet unpacks Q1 (RabbitMQ 4.0.5) or R1 (3.10.8).
func qqSalvageSet(t *testing.T, name string) qqSet {
	if name == "Q1" {
		q1 := testutil.Untar(t, testutil.Testdata("rabbitmq-4.0-qq-stream", "datasets", "Q1.tar.gz"))
		return qqSet{"Q1", filepath.Join(q1, "rmq40@localhost"), testutil.Testdata("rabbitmq-4.0-qq-stream", "results", "Q1"), []string{"qq1", "qq2", "qq3"}}
	}
	r1 := testutil.Untar(t, testutil.Testdata("rabbitmq-3.10-qq", "datasets", "R1.tar.gz"))
	return qqSet{"R1", filepath.Join(r1, "rmq310@localhost"), testutil.Testdata("rabbitmq-3.10-qq", "results", "R1"), []string{"ra", "rb", "rc", "rd", "re", "rf", "rg"}}
}

func exportQuorum(t *testing.T, node string, sels ...Selection) ([]Message, string, *Report) {
	t.Helper()
	return exportWith(t, node, func(w *Writer) (*Report, error) {
		return ExportQuorum(context.Background(), qscan.Config{Root: node}, Options{Select: sels}, w, nil)
	})
}

// compareDump checks the exported messages of queue q against what the
// restarted broker delivered: the same messages (id), each body
// byte-identical (size, sha256 of the body file read back) and the
// properties the dump records; skip names message ids left out.
func compareDump(t *testing.T, set qqSet, q, out string, msgs []Message, skip map[string]bool) int {
	t.Helper()
	p := filepath.Join(set.results, "restart", "dump-"+q+".jsonl")
	if _, err := os.Stat(p); err != nil {
		p += ".gz"
	}
	byID := map[string]*Message{}
	n := 0
	for i := range msgs {
		m := &msgs[i]
		if m.Queues[0] != q {
			continue
		}
		n++
		mid, _ := m.Properties["message_id"].(string)
		if byID[mid] != nil {
			t.Errorf("%s %s: %s exported twice", set.name, q, mid)
		}
		byID[mid] = m
	}
	dump := testutil.ReadJSONL[qqDump](t, p)
	matched := 0
	for _, d := range dump {
		if skip[d.MessageID] {
			continue
		}
		m := byID[d.MessageID]

		if m == nil {
			t.Errorf("%s %s: %s delivered by the restarted broker, not exported", set.name, q, d.MessageID)
			continue
		}
		body, err := ReadBody(out, m)
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(body)
		if hex.EncodeToString(sum[:]) != d.SHA256 || int64(len(body)) != d.Size || m.SHA256 != d.SHA256 {
			t.Errorf("%s %s %s: body %d bytes sha %x, the broker delivered %d bytes %s", set.name, q, d.MessageID, len(body), sum, d.Size, d.SHA256)
		}
		if d.Timestamp != 0 {
			if ts, _ := m.Properties["timestamp"].(float64); int64(ts) != d.Timestamp {
				t.Errorf("%s %s %s: timestamp %v, delivered %d", set.name, q, d.MessageID, m.Properties["timestamp"], d.Timestamp)
			}
		}
		if ct, _ := m.Properties["content_type"].(string); d.ContentType != "" && ct != d.ContentType {
			t.Errorf("%s %s %s: content_type %q, delivered %q", set.name, q, d.MessageID, ct, d.ContentType)
		}
		if cid, _ := m.Properties["correlation_id"].(string); cid != d.CorrelationID {
			t.Errorf("%s %s %s: correlation_id %q, delivered %q", set.name, q, d.MessageID, cid, d.CorrelationID)
		}
		if dm, _ := m.Properties["delivery_mode"].(float64); d.DeliveryMode != 0 && int(dm) != d.DeliveryMode {
			t.Errorf("%s %s %s: delivery_mode %v, delivered %d", set.name, q, d.MessageID, dm, d.DeliveryMode)
		}
		matched++
	}
	if n != matched {
		t.Errorf("%s %s: %d exported, %d of them delivered by the restarted broker", set.name, q, n, matched)
	}
	return matched
}

// TestQuorumSalvageMatchesRestart: salvage of every quorum queue of Q1
// (RabbitMQ 4.0.5) and R1 (3.10.8) exports exactly the messages the
// restarted broker delivered, bodies byte-identical, with their
// properties; nothing damaged, nothing missing.
func TestQuorumSalvageMatchesRestart(t *testing.T) {
	for _, name := range []string{"Q1", "R1"} {
		set := qqSalvageSet(t, name)
		msgs, out, rep := exportQuorum(t, set.node, SelectAll)
		if len(rep.Damaged)+len(rep.Missing)+rep.Skipped != 0 {
			t.Fatalf("%s: damaged %v, missing %v, skipped %d", set.name, rep.Damaged, rep.Missing, rep.Skipped)
		}
		total := 0
		for _, q := range set.queues {
			total += compareDump(t, set, q, out, msgs, nil)
		}
		if total != len(msgs) || total == 0 {
			t.Fatalf("%s: %d exported, %d matched", set.name, len(msgs), total)
		}
		for _, m := range msgs {
			if m.Location != LocationQuorum || m.RaIndex == nil || m.CRCMatch == nil || !*m.CRCMatch || m.Exchange == nil || len(m.RoutingKeys) == 0 {
				t.Fatalf("%s: %+v", set.name, m)
			}
		}
		t.Logf("%s: %d quorum queue messages exported, every one equal to the restarted broker's delivery (id, body sha256, properties)", set.name, total)
	}
}

// TestQuorumSalvageSegmentDamaged: on a copy of Q1 with one flipped byte
// in an enqueue entry of qq2's segment (the queue the broker then
// crash-loops on) salvage exports every other message of qq2, each
// byte-identical to the undamaged restart's, names the damaged entry
// (file, offset, raft index, message id), selects qq2's messages as lost
// (the queue does not start), and --select crc-damaged exports the
// damaged one flagged.
func TestQuorumSalvageSegmentDamaged(t *testing.T) {
	set := qqSalvageSet(t, "Q1")
	uid := "2F_QQ2Q5L9DBJGSLBP"
	seg := filepath.Join("quorum", "rmq40@localhost", uid, "00000001.segment")
	// the damaged entry: the middle one of qq2's live messages by the
	// undamaged scan
	msgs, _, _ := exportQuorum(t, set.node, SelectAll)
	var cand []Message
	for _, m := range msgs {
		if m.Queues[0] == "qq2" && m.Path == seg && m.Size > 200 {
			cand = append(cand, m)
		}
	}
	victim := cand[len(cand)/2]
	vid := victim.Properties["message_id"].(string)
	f, err := os.OpenFile(filepath.Join(set.node, seg), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	at := victim.Offset + victim.RecordSize - 40
	b := []byte{0}
	f.ReadAt(b, at)
	b[0] ^= 0xff
	f.WriteAt(b, at)
	f.Close()

	msgs, out, rep := exportQuorum(t, set.node, SelectAll, SelectLost)
	if len(rep.Damaged) != 1 {
		t.Fatalf("damaged: %+v", rep.Damaged)
	}
	d := rep.Damaged[0]
	if d.Queue != "qq2" || d.Path != seg || d.Offset != victim.Offset || d.Index != *victim.RaIndex || d.MessageID != vid || d.Exported ||
		!strings.Contains(d.Why, seg) {
		t.Fatalf("damaged entry %+v, want %s@%d index %d %s", d, seg, victim.Offset, *victim.RaIndex, vid)
	}
	var qq2 int
	for _, m := range msgs {
		if m.Queues[0] == "qq2" {
			qq2++
			if len(m.SelectedBy) != 2 || m.SelectedBy[1] != SelectLost {
				t.Fatalf("qq2 message selected by %v: %v", m.SelectedBy, m.Why)
			}
		} else if len(m.SelectedBy) != 1 {
			t.Fatalf("%s message selected by %v", m.Queues[0], m.SelectedBy)
		}
	}
	n := 0
	for _, q := range set.queues {
		n += compareDump(t, set, q, out, msgs, map[string]bool{vid: true})
	}
	if n != len(msgs) || qq2 != 159 {
		t.Fatalf("%d exported, %d matched, qq2 %d", len(msgs), n, qq2)
	}
	// the damaged one, on request, flagged
	dm, dout, drep := exportQuorum(t, set.node, SelectCRCDamaged)
	if len(dm) != 1 || !drep.Damaged[0].Exported || *dm[0].CRCMatch || dm[0].Properties["message_id"] != vid {
		t.Fatalf("crc-damaged: %+v %+v", dm, drep.Damaged)
	}
	body, _ := ReadBody(dout, &dm[0])
	if len(body) != int(victim.Size) || bytes.Equal(body, mustBody(t, out, msgs, vid)) {
		t.Fatalf("crc-damaged body: %d bytes", len(body))
	}
	t.Logf("segment-damaged Q1: %d messages exported equal to the undamaged restart's, the damaged entry named: %s", n, d.Why)
}

// mustBody returns the body of message id in an export, or nil.
func mustBody(t *testing.T, out string, msgs []Message, id string) []byte {
	for i := range msgs {
		if msgs[i].Properties["message_id"] == id {
			b, err := ReadBody(out, &msgs[i])
			if err != nil {
				t.Fatal(err)
			}
			return b
		}
	}
	return nil
}

// TestQuorumPublishRoundTrip: an export of Q1's quorum queues (each
// queue's first messages, and every large and empty one), published
// into quorum queues of the same names on a real RabbitMQ (Debian's
// 3.10.8), is delivered back in the export's order with the original bodies,
// message ids, timestamps, content types and headers; a second publish
// sends nothing.
func TestQuorumPublishRoundTrip(t *testing.T) {
	testutil.RequireRabbitMQ(t)
	url := startBroker(t)
	set := qqSalvageSet(t, "Q1")
	all, full, _ := exportQuorum(t, set.node, SelectAll)
	// publishing is one message at a time with confirms (a WAL fsync each
	// on the target): a sub-export of every queue's first 25 messages and
	// each large or empty one
	out := filepath.Join(t.TempDir(), "sub")
	w, err := Create(out, set.node)
	if err != nil {
		t.Fatal(err)
	}
	per := map[string]int{}
	for _, m := range all {
		if per[m.Queues[0]]++; per[m.Queues[0]] <= 25 || m.Size == 0 || m.Size > 65536 {
			body, _ := ReadBody(full, &m)
			if err := w.Add(m, body); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	msgs, err := ReadMessages(out)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := amqp.Dial(url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range set.queues {
		if _, err := ch.QueueDeclare(q, true, false, false, false, amqp.Table{"x-queue-type": "quorum"}); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	rep, err := Publish(ctx, out, PublishOptions{URL: url, ConfirmTimeout: 10 * time.Second})
	if err != nil || rep.Published != len(msgs) || rep.Failed != 0 {
		t.Fatalf("publish: %+v %v", rep, err)
	}
	if err := ch.Qos(500, 0, false); err != nil {
		t.Fatal(err)
	}
	got := 0
	for _, q := range set.queues {
		var want []Message
		for _, m := range msgs {
			if m.Queues[0] == q {
				want = append(want, m)
			}
		}
		dels, err := ch.Consume(q, "", false, false, false, false, nil)
		if err != nil {
			t.Fatal(err)
		}
		for i, m := range want {
			var d amqp.Delivery
			select {
			case d = <-dels:
			case <-time.After(20 * time.Second):
				t.Fatalf("%s: %d of %d deliveries", q, i, len(want))
			}
			d.Ack(false)
			body, _ := ReadBody(out, &m)
			orig, err := Publishing(m.PropertiesBin, nil)
			if err != nil {
				t.Fatal(err)
			}
			h := amqp.Table{}
			for k, v := range d.Headers {
				if k != "x-delivery-count" {
					h[k] = v
				}
			}
			if d.MessageId != orig.MessageId || !bytes.Equal(d.Body, body) || d.ContentType != orig.ContentType || d.DeliveryMode != 2 ||
				d.CorrelationId != orig.CorrelationId || !d.Timestamp.Equal(orig.Timestamp) || !sameJSON(tableOrNil(h), tableOrNil(orig.Headers)) {
				t.Fatalf("%s delivery %d: got %s %+v, exported %s %+v", q, i, d.MessageId, h, orig.MessageId, orig.Headers)
			}
			got++
		}
	}
	rep, err = Publish(ctx, out, PublishOptions{URL: url})
	if err != nil || rep.Published != 0 || rep.AlreadyConfirmed != len(msgs) {
		t.Fatalf("second publish: %+v %v", rep, err)
	}
	t.Logf("%d quorum queue messages of Q1 (of %d exported) published into quorum queues of RabbitMQ 3.10.8 and delivered back identical, in order", got, len(all))
}
