package salvage

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/storectl/storectl/internal/testutil"
	rscan "github.com/storectl/storectl/pkg/scan/rabbitmq"
)

// fixtureBindings is the topology of the fixtures' publisher (README of
// testdata/rabbitmq-4.0): fx.direct, k<i> -> q<i>, shared12 -> q1 and q2.
var fixtureBindings = map[string][]string{"k1": {"q1"}, "k2": {"q2"}, "k3": {"q3"}, "k4": {"q4"}, "shared12": {"q1", "q2"}}

// TestPublishRoundTrip starts a real RabbitMQ on 127.0.0.1, exports every
// message of the 4.0 crash dataset (shared store and the small messages of
// the queues' .qs files), re-publishes them with
// confirms, then basic.gets every queue: each message arrives once per
// queue its routing key is bound to, with the original body (sha256),
// properties and headers, persistent. A second publish sends nothing
// (every message is in the confirm log).
func TestPublishRoundTrip(t *testing.T) {
	url := startBroker(t)
	root := testutil.Untar(t, testutil.Testdata("rabbitmq-4.0", "datasets", "crash.tar.gz"))
	vdir := filepath.Join(root, "rmq40@localhost", "msg_stores", "vhosts", vhostHash)
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	msgs, out, _ := exportWith(t, root, func(w *Writer) (*Report, error) {
		return ExportRabbitMQ(ctx, rscan.Config{Root: root, VHostDirs: []string{vdir}}, Options{Select: []Selection{SelectAll}}, w)
	})
	var persistent []Message
	for _, m := range msgs {
		if m.Status == rscan.StatusReferenced || m.Status == rscan.StatusUnreferenced {
			persistent = append(persistent, m)
		}
	}
	if len(persistent) < 20 {
		t.Fatalf("only %d persistent messages exported", len(persistent))
	}
	// Topology, declared by the test as the fixture's publisher did.
	conn, err := amqp.Dial(url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if err := ch.ExchangeDeclare("fx.direct", "direct", true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"q1", "q2", "q3", "q4"} {
		if _, err := ch.QueueDeclare(q, true, false, false, false, nil); err != nil {
			t.Fatal(err)
		}
	}
	for key, qs := range fixtureBindings {
		for _, q := range qs {
			if err := ch.QueueBind(q, key, "fx.direct", false, nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Only the persistent-store messages are published: drop the
	// transient-store ones from the export's manifest view by publishing
	// all and expecting all (they route the same way).
	rep, err := Publish(ctx, out, PublishOptions{URL: url, ConfirmTimeout: 10 * time.Second})
	if err != nil {
		t.Fatalf("%v (%+v)", err, rep)
	}
	if rep.Published != len(msgs) || rep.Failed != 0 {
		t.Fatalf("publish: %+v, want %d published", rep, len(msgs))
	}
	// Expected per queue: body sha256 + message id + properties.
	type key struct{ sha, mid string }
	want := map[string]map[key]int{}
	byKey := map[key]Message{}
	for _, m := range msgs {
		mid, _ := m.Properties["message_id"].(string)
		k := key{m.SHA256, mid}
		byKey[k] = m
		for _, q := range fixtureBindings[firstKey(&m)] {
			if want[q] == nil {
				want[q] = map[key]int{}
			}
			want[q][k]++
		}
	}
	got, compared, small := 0, 0, 0
	for _, q := range []string{"q1", "q2", "q3", "q4"} {
		for {
			d, ok, err := ch.Get(q, true)
			if err != nil {
				t.Fatal(err)
			}
			if !ok {
				break
			}
			got++
			sum := sha256.Sum256(d.Body)
			k := key{fmt.Sprintf("%x", sum), d.MessageId}
			if want[q][k] == 0 {
				t.Errorf("%s: unexpected message %s (%d bytes)", q, d.MessageId, len(d.Body))
				continue
			}
			want[q][k]--
			m := byKey[k]
			orig, err := Publishing(m.PropertiesBin, nil)
			if err != nil {
				t.Fatal(err)
			}
			body, err := ReadBody(out, &m)
			if err != nil || !bytes.Equal(body, d.Body) {
				t.Errorf("%s: body of %s differs", q, d.MessageId)
			}
			if d.DeliveryMode != amqp.Persistent || d.ContentType != orig.ContentType || d.MessageId != orig.MessageId ||
				d.Exchange != "fx.direct" || d.RoutingKey != firstKey(&m) || !reflect.DeepEqual(tableOrNil(d.Headers), tableOrNil(orig.Headers)) ||
				!d.Timestamp.Equal(orig.Timestamp) || d.AppId != orig.AppId || d.CorrelationId != orig.CorrelationId {
				t.Errorf("%s: properties of %s differ: got %+v want %+v", q, d.MessageId, d.Headers, orig)
			}
			compared++
			if m.Location == "queue-store" {
				small++
			}
		}
	}
	if small == 0 {
		t.Error("no queue-store (.qs) message was published and read back")
	}
	for q, m := range want {
		for k, n := range m {
			if n != 0 {
				t.Errorf("%s: %d copies of %s missing", q, n, k.mid)
			}
		}
	}
	t.Logf("%d messages exported and published with confirms; %d deliveries read back and compared, %d of them .qs messages", len(msgs), compared, small)
	// Resume: nothing left to send.
	rep, err = Publish(ctx, out, PublishOptions{URL: url})
	if err != nil || rep.Published != 0 || rep.AlreadyConfirmed != len(msgs) {
		t.Fatalf("second publish: %+v %v", rep, err)
	}
}

func tableOrNil(t amqp.Table) amqp.Table {
	if len(t) == 0 {
		return nil
	}
	return t
}
