package salvage

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/storectl/storectl/internal/streamtest"
	"github.com/storectl/storectl/internal/testutil"
	"github.com/storectl/storectl/pkg/format/osiris"
	rfmt "github.com/storectl/storectl/pkg/format/rabbitmq"
	sscan "github.com/storectl/storectl/pkg/scan/stream"
)

// exportStreams exports node's streams with sels and returns the manifest.
func exportStreams(t *testing.T, node, version string, sels ...Selection) ([]Message, string, *Report) {
	t.Helper()
	cfg := sscan.Config{Root: node, StreamRoots: []string{filepath.Join(node, "stream")}, BrokerVersion: version}
	return exportWith(t, node, func(w *Writer) (*Report, error) {
		return ExportStreams(context.Background(), cfg, Options{Select: sels}, w, nil)
	})
}

// TestStreamSalvageMatchesRestart: salvage of S1's streams equals, per
// message, what the restarted 4.0.5 broker delivered (message id, body
// sha256 and size, headers, timestamp, correlation id, content type,
// delivery mode), through the properties_bin Publish would send.
func TestStreamSalvageMatchesRestart(t *testing.T) {
	for _, ds := range []streamtest.Dataset{streamtest.Datasets40[0], streamtest.Datasets310[0]} {
		t.Run(ds.Name, func(t *testing.T) { salvageMatchesRestart(t, ds) })
	}
}

func salvageMatchesRestart(t *testing.T, ds streamtest.Dataset) {
	node := filepath.Join(testutil.Untar(t, ds.Tarball), ds.Node)
	msgs, out, rep := exportStreams(t, node, ds.Version, SelectAll)
	byQueue := map[string][]Message{}
	for _, m := range msgs {
		if m.Location != LocationStream || m.StreamOffset == nil || len(m.Queues) != 1 {
			t.Fatalf("not a stream message: %+v", m)
		}
		byQueue[m.Queues[0]] = append(byQueue[m.Queues[0]], m)
	}
	n := 0
	for q, ms := range byQueue {
		sort.Slice(ms, func(i, j int) bool { return *ms[i].StreamOffset < *ms[j].StreamOffset })
		dl := streamtest.Deliveries(t, ds, q)
		if len(dl) != len(ms) {
			t.Fatalf("%s: %d exported, %d delivered", q, len(ms), len(dl))
		}
		for i, d := range dl {
			m := ms[i]
			body, err := ReadBody(out, &m)
			if err != nil {
				t.Fatal(err)
			}
			sum := sha256.Sum256(body)
			p, err := rfmt.DecodeBasicProperties(m.PropertiesBin, 0)
			if err != nil {
				t.Fatal(err)
			}
			hdr := d.Headers
			delete(hdr, "x-stream-offset")
			str := func(s *string) string {
				if s == nil {
					return ""
				}
				return *s
			}
			if uint64(d.Offset) != *m.StreamOffset || d.MessageID != m.MsgID || d.MessageID != str(p.MessageID) ||
				d.SHA256 != hex.EncodeToString(sum[:]) || d.SHA256 != m.SHA256 || d.Size != m.Size ||
				!streamtest.SameJSON(hdr, streamtest.Headers091(p.Headers)) || uint64(d.Timestamp) != *p.Timestamp ||
				d.CorrelationID != str(p.CorrelationID) || d.ContentType != str(p.ContentType) || d.DeliveryMode != int(*p.DeliveryMode) {
				t.Fatalf("%s delivery %d: broker %+v, salvage %+v (%+v)", q, i, d, m, p)
			}
			for k, v := range map[string][2]*string{"content_encoding": {d.ContentEncoding, p.ContentEncoding}, "expiration": {d.Expiration, p.Expiration},
				"reply_to": {d.ReplyTo, p.ReplyTo}, "type": {d.Type, p.Type}, "app_id": {d.AppID, p.AppID}} {
				if v[0] != nil && *v[0] != str(v[1]) {
					t.Fatalf("%s delivery %d: %s: broker %q, salvage %q", q, i, k, *v[0], str(v[1]))
				}
			}
			if d.Priority != nil && (p.Priority == nil && *d.Priority != 0 || p.Priority != nil && int(*p.Priority) != *d.Priority) {
				t.Fatalf("%s delivery %d: priority %d, salvage %v", q, i, *d.Priority, p.Priority)
			}
			if *m.Exchange != "" || m.RoutingKeys[0] != q {
				t.Fatalf("%s: route %q %v", q, *m.Exchange, m.RoutingKeys)
			}
			n++
		}
	}
	if n == 0 || rep.Selected != n || n != len(msgs) {
		t.Fatalf("%d compared, %d selected, %d exported", n, rep.Selected, len(msgs))
	}
	t.Logf("%s: %d salvaged messages equal the restarted broker's deliveries", ds.Name, n)
}

// TestStreamSalvageSelections: on a copy of S1 with one flipped byte in a
// chunk of s1a and s1c's last segment cut mid-chunk.
func TestStreamSalvageSelections(t *testing.T) {
	ds := streamtest.Datasets40[0]
	node := filepath.Join(testutil.Untar(t, ds.Tarball), ds.Node)
	s1a, _ := filepath.Glob(filepath.Join(node, "stream", "__s1a_*"))
	seg := filepath.Join(s1a[0], "00000000000000000293.segment")
	b, _ := os.ReadFile(seg)
	sr, _ := osiris.NewSegmentReader(bytes.NewReader(b), int64(len(b)))
	var bad osiris.Chunk
	for sr.Next() {
		if c := sr.Chunk(); c.Header.Type == osiris.ChunkUser && c.Header.NumEntries > 2 {
			bad = *c
			break
		}
	}
	b[bad.Pos+bad.Header.DataOffset()+30] ^= 0x40
	os.WriteFile(seg, b, 0o644)
	damaged := int(bad.Header.NumRecords)

	all, _, rep := exportStreams(t, node, "4.0.5", SelectAll)
	if len(all) != 1760-damaged || len(rep.Notes) == 0 {
		t.Fatalf("all: %d exported, want %d (notes %v)", len(all), 1760-damaged, rep.Notes)
	}
	crc, _, _ := exportStreams(t, node, "4.0.5", SelectCRCDamaged)
	if len(crc) != damaged {
		t.Fatalf("crc-damaged: %d, want %d", len(crc), damaged)
	}
	for _, m := range crc {
		if *m.CRCMatch || *m.ChunkID != bad.Header.ChunkID || m.SelectedBy[0] != SelectCRCDamaged {
			t.Fatalf("crc-damaged: %+v", m)
		}
	}
	after, _, _ := exportStreams(t, node, "4.0.5", SelectAfterCorruption)
	want := 0
	for _, m := range all {
		if m.Queues[0] == "s1a" && *m.StreamOffset >= bad.Header.NextOffset() {
			want++
		}
	}
	if len(after) != want || want == 0 {
		t.Fatalf("after-corruption: %d, want %d", len(after), want)
	}
	// lost: the whole entries of a torn last chunk
	last := filepath.Join(s1a[0], "00000000000000001171.segment")
	lb, _ := os.ReadFile(last)
	lr, _ := osiris.NewSegmentReader(bytes.NewReader(lb), int64(len(lb)))
	var tc osiris.Chunk
	for lr.Next() {
		tc = *lr.Chunk()
	}
	it := osiris.Entries(tc.Data, tc.Pos+tc.Header.DataOffset())
	it.Next()
	if tc.Header.NumEntries < 2 {
		t.Fatal("s1a's last chunk has one entry")
	}
	if err := os.Truncate(last, it.Entry().Pos+it.Entry().Size()+5); err != nil {
		t.Fatal(err)
	}
	lost, _, _ := exportStreams(t, node, "4.0.5", SelectLost)
	if len(lost) != 1 || !lost[0].Torn || *lost[0].StreamOffset != tc.Header.ChunkID || lost[0].Status == "on disk" {
		t.Fatalf("lost: %+v", lost)
	}
}

// TestStreamPublishRoundTrip: a stream's salvage published with confirms
// into a new stream of a real broker (Debian's rabbitmq-server) reads back
// the same (message ids, bodies, headers, properties); a second publish
// resumes and sends nothing.
func TestStreamPublishRoundTrip(t *testing.T) {
	testutil.RequireRabbitMQ(t)
	url := startBroker(t)
	ds := streamtest.Datasets40[0]
	node := filepath.Join(testutil.Untar(t, ds.Tarball), ds.Node)
	msgs, out, _ := exportStreams(t, node, "4.0.5", SelectAll)
	conn, err := amqp.Dial(url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ch.QueueDeclare("restored", true, false, false, false, amqp.Table{"x-queue-type": "stream"}); err != nil {
		t.Fatal(err)
	}
	var s1c []Message
	for _, m := range msgs {
		if m.Queues[0] == "s1c" {
			s1c = append(s1c, m)
		}
	}
	sort.Slice(s1c, func(i, j int) bool { return *s1c[i].StreamOffset < *s1c[j].StreamOffset })
	// publish only s1c: an export dir holding just those
	sub := filepath.Join(t.TempDir(), "s1c")
	w, err := Create(sub, node)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range s1c {
		body, _ := ReadBody(out, &m)
		if err := w.Add(m, body); err != nil {
			t.Fatal(err)
		}
	}
	w.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	rep, err := Publish(ctx, sub, PublishOptions{URL: url, Queue: "restored", ConfirmTimeout: 10 * time.Second})
	if err != nil || rep.Published != len(s1c) || rep.Failed != 0 {
		t.Fatalf("publish: %+v %v", rep, err)
	}
	if err := ch.Qos(100, 0, false); err != nil {
		t.Fatal(err)
	}
	dels, err := ch.Consume("restored", "", false, false, false, false, amqp.Table{"x-stream-offset": "first"})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < len(s1c); i++ {
		var d amqp.Delivery
		select {
		case d = <-dels:
		case <-time.After(20 * time.Second):
			t.Fatalf("%d of %d deliveries", i, len(s1c))
		}
		d.Ack(false)
		m := s1c[i]
		body, _ := ReadBody(out, &m)
		orig, err := Publishing(m.PropertiesBin, nil)
		if err != nil {
			t.Fatal(err)
		}
		h := amqp.Table{}
		for k, v := range d.Headers {
			if k != "x-stream-offset" {
				h[k] = v
			}
		}
		if d.MessageId != m.MsgID || !bytes.Equal(d.Body, body) || d.ContentType != orig.ContentType ||
			d.CorrelationId != orig.CorrelationId || !d.Timestamp.Equal(orig.Timestamp) || !streamtest.SameJSON(tableOrNil(h), tableOrNil(orig.Headers)) {
			t.Fatalf("delivery %d: got %s %+v, exported %s %+v", i, d.MessageId, h, m.MsgID, orig.Headers)
		}
	}
	rep, err = Publish(ctx, sub, PublishOptions{URL: url, Queue: "restored"})
	if err != nil || rep.Published != 0 || rep.AlreadyConfirmed != len(s1c) {
		t.Fatalf("second publish: %+v %v", rep, err)
	}
	t.Logf("%d stream messages published into a stream of RabbitMQ and read back identical", len(s1c))
}

// sameJSON is streamtest.SameJSON (the quorum publish test uses it too).
func sameJSON(a, b any) bool { return streamtest.SameJSON(a, b) }
