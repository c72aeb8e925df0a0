// Command qqwork drives the RabbitMQ workloads that made the quorum queue
// datasets of testdata/rabbitmq-3.10-qq (make.sh there runs it against a
// private Debian rabbitmq-server 3.10.8): it declares queues, publishes
// deterministic messages with confirms, takes them with basic.get or a
// consumer and acknowledges, rejects or leaves them by rule, and dumps
// what a restarted broker delivers. Every step writes JSON lines (the
// ground truth the tests compare with).
//
//	qqwork declare -url U -queue Q [-arg k=v]...
//	qqwork publish -url U -queue Q -from S -n N [-expire-every K] [-priority-every K]
//	qqwork get     -url U -queue Q -n N -ack A -requeue R -discard D  (per seq%(A+R+D))
//	qqwork consume -url U -queue Q -prefetch P -n N -ack A -requeue R -discard D -hold H
//	qqwork flood   -url U -queue Q -from S -ack-queue Q2   (until the connection dies)
//	qqwork purge   -url U -queue Q
//	qqwork dump    -url U -queue Q       (consume without ack, close: requeued)
//
// Message seq s: message-id m%07d, timestamp 1767225600+s, body by s%5 of
// size 1+(s*7919)%2000 (s%13 == 0: empty; s%97 == 96: 70 000 bytes),
// headers {seq} when s%3 == 0, a table and an array when s%3 == 1.
package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: qqwork declare|publish|get|consume|flood|purge|dump -url U -queue Q ...")
		os.Exit(2)
	}
	cmd := os.Args[1]
	fs := flag.NewFlagSet(cmd, flag.ExitOnError)
	url := fs.String("url", "amqp://guest:guest@127.0.0.1:5672/", "AMQP URL")
	queue := fs.String("queue", "", "queue")
	from := fs.Int("from", 0, "first seq")
	n := fs.Int("n", 0, "messages")
	ack := fs.Int("ack", 1, "ack weight")
	requeue := fs.Int("requeue", 0, "reject-requeue weight")
	discard := fs.Int("discard", 0, "nack-discard weight")
	prefetch := fs.Int("prefetch", 10, "consumer prefetch")
	hold := fs.Int("hold", 0, "leave the last H deliveries unacked (returned at close)")
	expireEvery := fs.Int("expire-every", 0, "every Kth message gets expiration 86400000")
	prioEvery := fs.Int("priority-every", 0, "every Kth message gets priority 5")
	ackQueue := fs.String("ack-queue", "", "flood: consume and ack this queue on a second connection")
	cprio := fs.Int("consumer-priority", 0, "consume: x-priority of the consumer")
	var args multi
	fs.Var(&args, "arg", "declare argument k=v (v an integer when it parses as one)")
	fs.Parse(os.Args[2:])
	out := &encoder{e: json.NewEncoder(os.Stdout)}
	conn, err := amqp.Dial(*url)
	check(err)
	defer conn.Close()
	ch, err := conn.Channel()
	check(err)
	switch cmd {
	case "declare":
		t := amqp.Table{"x-queue-type": "quorum"}
		for _, a := range args {
			k, v, _ := strings.Cut(a, "=")
			if i, err := strconv.ParseInt(v, 10, 64); err == nil {
				t[k] = i
			} else if v == "true" || v == "false" {
				t[k] = v == "true"
			} else {
				t[k] = v
			}
		}
		_, err := ch.QueueDeclare(*queue, true, false, false, false, t)
		check(err)
	case "publish":
		check(ch.Confirm(false))
		confirms := ch.NotifyPublish(make(chan amqp.Confirmation, *n+1))
		for s := *from; s < *from+*n; s++ {
			p := message(s, *expireEvery, *prioEvery)
			check(ch.PublishWithContext(context.Background(), "", *queue, false, false, p))
			c := <-confirms
			out.Encode(map[string]any{"ev": "pub", "seq": s, "message_id": p.MessageId, "size": len(p.Body), "sha256": sum(p.Body), "ack": c.Ack})
		}
	case "get":
		w := *ack + *requeue + *discard
		for i := 0; i < *n; i++ {
			d, ok, err := ch.Get(*queue, false)
			check(err)
			if !ok {
				break
			}
			act := decide(d, w, *ack, *requeue)
			out.Encode(delivery(d, act))
		}
	case "consume":
		check(ch.Qos(*prefetch, 0, false))
		cargs := amqp.Table{}
		if *cprio != 0 {
			cargs["x-priority"] = int64(*cprio)
		}
		ds, err := ch.Consume(*queue, "", false, false, false, false, cargs)
		check(err)
		w := *ack + *requeue + *discard
		for i := 0; i < *n; i++ {
			var d amqp.Delivery
			select {
			case d = <-ds:
			case <-time.After(3 * time.Second):
				i = *n
				continue
			}
			if i >= *n-*hold {
				out.Encode(delivery(d, "held"))
				continue
			}
			out.Encode(delivery(d, decide(d, w, *ack, *requeue)))
		}
	case "flood":
		check(ch.Confirm(false))
		confirms := ch.NotifyPublish(make(chan amqp.Confirmation, 1<<16))
		if *ackQueue != "" {
			go ackAll(*url, *ackQueue, out)
		}
		go func() {
			for c := range confirms {
				out.Encode(map[string]any{"ev": "confirm", "delivery_tag": c.DeliveryTag, "ack": c.Ack})
			}
		}()
		for s := *from; ; s++ {
			p := message(s, *expireEvery, *prioEvery)
			out.Encode(map[string]any{"ev": "pub", "seq": s, "message_id": p.MessageId, "size": len(p.Body), "sha256": sum(p.Body)})
			if err := ch.PublishWithContext(context.Background(), "", *queue, false, false, p); err != nil {
				out.Encode(map[string]any{"ev": "closed", "next_seq": s})
				return
			}
			time.Sleep(2 * time.Millisecond)
		}
	case "purge":
		m, err := ch.QueuePurge(*queue, false)
		check(err)
		out.Encode(map[string]any{"ev": "purge", "messages": m})
	case "dump":
		// no prefetch limit: without acks a limit would stop the dump
		check(ch.Qos(0, 0, false))
		ds, err := ch.Consume(*queue, "", false, false, false, false, nil)
		check(err)
		i := 0
		for {
			select {
			case d := <-ds:
				m := delivery(d, "")
				m["n"] = i
				i++
				out.Encode(m)
			case <-time.After(3 * time.Second):
				return
			}
		}
	default:
		fmt.Fprintln(os.Stderr, "unknown command", cmd)
		os.Exit(2)
	}
}

// encoder is a json.Encoder safe for the flood's goroutines.
type encoder struct {
	mu sync.Mutex
	e  *json.Encoder
}

func (e *encoder) Encode(v any) {
	e.mu.Lock()
	e.e.Encode(v)
	e.mu.Unlock()
}

type multi []string

func (m *multi) String() string     { return strings.Join(*m, ",") }
func (m *multi) Set(s string) error { *m = append(*m, s); return nil }

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "qqwork:", err)
		os.Exit(1)
	}
}

func sum(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// message builds the publishing of seq s.
func message(s, expireEvery, prioEvery int) amqp.Publishing {
	size := 1 + (s*7919)%2000
	switch {
	case s%97 == 96:
		size = 70000
	case s%13 == 0:
		size = 0
	}
	var body []byte
	switch s % 5 {
	case 0:
		body = bytes.Repeat([]byte(fmt.Sprintf("qq message %d | ", s)), size/10+1)[:size]
	case 1:
		body = make([]byte, size)
	case 2:
		body = bytes.Repeat([]byte{0xff}, size)
	default:
		body = make([]byte, size)
		x := uint32(s*2654435761 + 1)
		for i := range body {
			x ^= x << 13
			x ^= x >> 17
			x ^= x << 5
			body[i] = byte(x)
		}
	}
	p := amqp.Publishing{DeliveryMode: amqp.Persistent, MessageId: fmt.Sprintf("m%07d", s),
		Timestamp: time.Unix(1767225600+int64(s), 0), ContentType: "application/octet-stream", Body: body}
	switch s % 3 {
	case 0:
		p.Headers = amqp.Table{"seq": int64(s)}
	case 1:
		p.Headers = amqp.Table{"seq": int64(s), "t": amqp.Table{"a": int32(1), "b": "x"}, "arr": []any{int32(s), "e"}, "bin": []byte{0, 1, 0xff}}
	}
	if expireEvery > 0 && s%expireEvery == 0 {
		p.Expiration = "86400000"
	}
	if prioEvery > 0 && s%prioEvery == 0 {
		p.Priority = 5
	}
	return p
}

func seqOf(d amqp.Delivery) int {
	n, _ := strconv.Atoi(strings.TrimPrefix(d.MessageId, "m"))
	return n
}

// decide acts on d by its seq: the first ack weights ack, the next
// requeue weights reject-requeue, the rest nack-discard.
func decide(d amqp.Delivery, w, ack, requeue int) string {
	r := seqOf(d) % w
	switch {
	case r < ack:
		check(d.Ack(false))
		return "ack"
	case r < ack+requeue:
		if d.Redelivered {
			check(d.Ack(false))
			return "ack_redelivered"
		}
		check(d.Reject(true))
		return "reject_requeue"
	default:
		check(d.Nack(false, false))
		return "nack_discard"
	}
}

func delivery(d amqp.Delivery, act string) map[string]any {
	m := map[string]any{"message_id": d.MessageId, "size": len(d.Body), "sha256": sum(d.Body), "redelivered": d.Redelivered}
	if act != "" {
		m["action"] = act
	}
	if v, ok := d.Headers["x-delivery-count"]; ok {
		m["x_delivery_count"] = v
	}
	return m
}

// ackAll consumes q on a second connection and acks every delivery.
func ackAll(url, q string, out *encoder) {
	conn, err := amqp.Dial(url)
	if err != nil {
		return
	}
	ch, err := conn.Channel()
	if err != nil {
		return
	}
	ch.Qos(50, 0, false)
	ds, err := ch.Consume(q, "", false, false, false, false, nil)
	if err != nil {
		return
	}
	for d := range ds {
		if d.Ack(false) == nil {
			out.Encode(map[string]any{"ev": "ack_sent", "message_id": d.MessageId, "sha256": sum(d.Body)})
		}
	}
}
