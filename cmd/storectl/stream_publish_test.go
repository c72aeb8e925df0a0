package main

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/storectl/storectl/internal/streamtest"
	"github.com/storectl/storectl/internal/testutil"
)

// json091 renders a delivery's header value as the datasets' dump
// consumers wrote it (restart/dump-*.jsonl).
func json091(v any) any {
	switch x := v.(type) {
	case string:
		if !utf8.ValidString(x) {
			return map[string]any{"str_hex": hex.EncodeToString([]byte(x))}
		}
	case []byte:
		return map[string]any{"bin_hex": hex.EncodeToString(x)}
	case time.Time:
		return map[string]any{"timestamp": x.Unix()}
	case amqp.Table:
		m := map[string]any{}
		for k, e := range x {
			m[k] = json091(e)
		}
		return m
	case []any:
		var a []any
		for _, e := range x {
			a = append(a, json091(e))
		}
		return a
	}
	return v
}

// TestStreamSalvagePublishCLI: storectl salvage --publish --publish-to of
// the 3.10.8 dataset's stream orders_v2 (vhost prod_eu) into a new stream
// of a real broker (Debian's rabbitmq-server 3.10.8, a fresh node): an
// AMQP 0-9-1 consumer reading it from x-stream-offset first gets what the
// restarted original broker delivered from the original stream
// (restart/dump-orders_v2.jsonl): message id, size, sha256, headers,
// timestamp and every other property, in order; running the command
// again sends nothing. --broker-version 3.10.8: the properties are the
// ones 3.10.8 delivers (4.0 hands binary headers out as long strings).
func TestStreamSalvagePublishCLI(t *testing.T) {
	testutil.RequireRabbitMQ(t)
	ds := streamtest.Datasets310[0]
	node := filepath.Join(testutil.Untar(t, ds.Tarball), ds.Node)
	r := testutil.StartRabbitOn(t, filepath.Join(t.TempDir(), "storectlpub@localhost"), "storectlpub@localhost")
	conn, err := amqp.Dial(r.URL)
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
	out := filepath.Join(t.TempDir(), "out")
	args := []string{"salvage", node, "--out", out, "--queue", "orders_v2", "--broker-version", "3.10.8", "--publish", r.URL, "--publish-to", "restored", "-o", "jsonl"}
	if code, stdout, errOut := runCLI(t, args...); code != exitOK {
		t.Fatalf("salvage --publish: exit %d\n%s%s", code, stdout, errOut)
	}
	want := streamtest.Deliveries(t, ds, "orders_v2")
	if err := ch.Qos(100, 0, false); err != nil {
		t.Fatal(err)
	}
	dels, err := ch.Consume("restored", "", false, false, false, false, amqp.Table{"x-stream-offset": "first"})
	if err != nil {
		t.Fatal(err)
	}
	fields := 0
	for i, w := range want {
		var d amqp.Delivery
		select {
		case d = <-dels:
		case <-time.After(20 * time.Second):
			t.Fatalf("%d of %d deliveries", i, len(want))
		}
		d.Ack(false)
		h := map[string]any{}
		for k, v := range d.Headers {
			if k != "x-stream-offset" {
				h[k] = json091(v)
			}
		}
		delete(w.Headers, "x-stream-offset")
		sum := sha256hex(d.Body)
		got := []any{d.MessageId, len(d.Body), sum, d.Timestamp.Unix(), d.CorrelationId, d.ContentType, d.DeliveryMode,
			d.ContentEncoding, d.Priority, d.Expiration, d.ReplyTo, d.Type, d.AppId}
		exp := []any{w.MessageID, w.Size, w.SHA256, w.Timestamp, w.CorrelationID, w.ContentType, w.DeliveryMode,
			*w.ContentEncoding, *w.Priority, *w.Expiration, *w.ReplyTo, *w.Type, *w.AppID}
		fields += len(got) + 1
		if fmt.Sprint(got) != fmt.Sprint(exp) || !streamtest.SameJSON(h, w.Headers) {
			t.Fatalf("delivery %d: got %v %v, the original broker delivered %v %v", i, got, h, exp, w.Headers)
		}
	}
	select {
	case d := <-dels:
		t.Fatalf("a delivery more than the original broker's: %s", d.MessageId)
	case <-time.After(500 * time.Millisecond):
	}
	code, stdout, _ := runCLI(t, args...)
	if code != exitOK || !strings.Contains(stdout, `"already_confirmed":200`) || !strings.Contains(stdout, `"published":0`) {
		t.Fatalf("second run: exit %d\n%s", code, stdout)
	}
	t.Logf("%d messages salvaged from the 3.10.8 stream, published and read back as the original broker delivered them (%d fields)", len(want), fields)
}

func sha256hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}
