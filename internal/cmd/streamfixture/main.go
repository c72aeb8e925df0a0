// Command streamfixture drives a real RabbitMQ broker over AMQP 0-9-1 to
// make the stream fixtures in testdata/rabbitmq-3.10-stream (see its
// README): publish writes a deterministic workload into a stream with
// publisher confirms and records every message it sent; dump consumes a
// stream from its first offset and records every delivery. Tests do not
// run it.
//
//	streamfixture publish -url URL -queue Q [-declare-args k=v,...] -from N -count N -batch B -out FILE
//	streamfixture dump -url URL -queue Q -out FILE
package main

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand"
	"os"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	amqp "github.com/rabbitmq/amqp091-go"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: streamfixture publish|dump [flags]")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "publish":
		err = publish(os.Args[2:])
	case "dump":
		err = dump(os.Args[2:])
	default:
		err = fmt.Errorf("unknown command %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "streamfixture:", err)
		os.Exit(1)
	}
}

// Sent is one line of a publish manifest.
type Sent struct {
	Seq           int            `json:"seq"`
	MessageID     string         `json:"message_id"`
	Queue         string         `json:"queue"`
	Size          int            `json:"size"`
	SHA256        string         `json:"sha256"`
	Headers       map[string]any `json:"headers"`
	ContentType   string         `json:"content_type,omitempty"`
	CorrelationID string         `json:"correlation_id,omitempty"`
	Timestamp     int64          `json:"timestamp"`
	BatchFirst    int            `json:"batch_first"`
	Confirmed     bool           `json:"confirmed"`
}

// message builds the deterministic message of seq.
func message(seq int) amqp.Publishing {
	p := amqp.Publishing{MessageId: fmt.Sprintf("p%06d", seq), DeliveryMode: amqp.Persistent,
		Timestamp: time.Unix(1767225600+int64(seq), 0)}
	if seq%3 == 0 {
		p.CorrelationId = fmt.Sprintf("c%d", seq/3)
	}
	switch seq % 5 {
	case 1:
		p.ContentType = "application/json"
	case 2:
		p.ContentType, p.ContentEncoding = "text/plain", "utf-8"
	}
	if seq%7 == 3 {
		p.Type, p.AppId = fmt.Sprintf("t%d", seq%10), "fx"
	}
	if seq%11 == 0 {
		p.Priority = uint8(seq % 4)
	}
	if seq%13 == 5 {
		p.Expiration = "60000000"
	}
	if seq%17 == 0 {
		p.ReplyTo = fmt.Sprintf("r%d", seq)
	}
	switch seq % 5 {
	case 1:
		p.Headers = amqp.Table{"seq": int32(seq)}
	case 2:
		p.Headers = amqp.Table{"seq": int32(seq), "str": fmt.Sprintf("value-%d", seq), "bool": seq%2 == 0,
			"i64": int64(seq) * 1000003, "f64": float64(seq) / 4, "utf8": "grüße-✓"}
	case 3:
		p.Headers = amqp.Table{"seq": int32(seq), "bin": []byte{0, 1, 2, 0xff, byte(seq)}, "long": strings.Repeat("h", 300)}
	case 4:
		p.Headers = amqp.Table{"seq": int32(seq), "tbl": amqp.Table{"a": int32(1)}, "arr": []any{int32(1), "x"},
			"ts": time.Unix(1767225600, 0), "b": int8(-3), "s": int16(-300), "ub": uint8(200)}
	}
	size := 1 + (seq*7919)%3000
	switch {
	case seq%50 == 49:
		size = min(100000+seq*37, 400000)
	case seq%13 == 0:
		size = 0
	}
	body := make([]byte, size)
	switch seq % 4 {
	case 0:
		copy(body, strings.Repeat(fmt.Sprintf("stream fixture message seq=%d | ", seq), size/20+1))
	case 1: // zeros
	case 2:
		rand.New(rand.NewSource(int64(seq))).Read(body)
	case 3:
		for i := range body {
			body[i] = 0xff
		}
	}
	p.Body = body
	return p
}

func jsonHeaders(t amqp.Table) map[string]any {
	out := map[string]any{}
	for k, v := range t {
		out[k] = jsonValue(v)
	}
	return out
}

func jsonValue(v any) any {
	switch x := v.(type) {
	case []byte:
		return map[string]any{"bin_hex": hex.EncodeToString(x)}
	case string:
		if !utf8.ValidString(x) {
			return map[string]any{"str_hex": hex.EncodeToString([]byte(x))}
		}
		return x
	case amqp.Table:
		return jsonHeaders(x)
	case []any:
		a := make([]any, len(x))
		for i, e := range x {
			a[i] = jsonValue(e)
		}
		return a
	case time.Time:
		return map[string]any{"timestamp": x.Unix()}
	}
	return v
}

func parseArgs(s string) amqp.Table {
	t := amqp.Table{}
	for _, kv := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			continue
		}
		if n, err := strconv.ParseInt(v, 10, 64); err == nil {
			t[k] = n
		} else {
			t[k] = v
		}
	}
	return t
}

func publish(args []string) error {
	fs := flag.NewFlagSet("publish", flag.ExitOnError)
	url := fs.String("url", "", "AMQP URL")
	queue := fs.String("queue", "", "stream name")
	declare := fs.String("declare-args", "x-queue-type=stream", "queue arguments k=v,...")
	from := fs.Int("from", 0, "first seq")
	count := fs.Int("count", 100, "messages")
	batch := fs.Int("batch", 1, "messages published before waiting for their confirms")
	out := fs.String("out", "", "manifest (jsonl, appended)")
	fs.Parse(args)
	conn, err := amqp.Dial(*url)
	if err != nil {
		return err
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		return err
	}
	if _, err := ch.QueueDeclare(*queue, true, false, false, false, parseArgs(*declare)); err != nil {
		return err
	}
	if err := ch.Confirm(false); err != nil {
		return err
	}
	f, err := os.OpenFile(*out, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	w := bufio.NewWriter(f)
	defer w.Flush()
	ctx := context.Background()
	for first := *from; first < *from+*count; first += *batch {
		var pending []*amqp.DeferredConfirmation
		var sent []Sent
		for seq := first; seq < min(first+*batch, *from+*count); seq++ {
			p := message(seq)
			dc, err := ch.PublishWithDeferredConfirmWithContext(ctx, "", *queue, true, false, p)
			if err != nil {
				return err
			}
			sum := sha256.Sum256(p.Body)
			pending = append(pending, dc)
			sent = append(sent, Sent{Seq: seq, MessageID: p.MessageId, Queue: *queue, Size: len(p.Body), SHA256: hex.EncodeToString(sum[:]),
				Headers: jsonHeaders(p.Headers), ContentType: p.ContentType, CorrelationID: p.CorrelationId, Timestamp: p.Timestamp.Unix(), BatchFirst: first})
		}
		for i, dc := range pending {
			ok, err := dc.WaitContext(ctx)
			if err != nil {
				return err
			}
			sent[i].Confirmed = ok
			b, _ := json.Marshal(sent[i])
			w.Write(append(b, '\n'))
		}
	}
	return nil
}

// Delivery is one line of a dump.
type Delivery struct {
	N             int            `json:"n"`
	MessageID     string         `json:"message_id"`
	Size          int            `json:"size"`
	SHA256        string         `json:"sha256"`
	Headers       map[string]any `json:"headers"`
	Timestamp     int64          `json:"timestamp"`
	CorrelationID string         `json:"correlation_id"`
	ContentType   string         `json:"content_type"`
	ContentEnc    string         `json:"content_encoding"`
	DeliveryMode  uint8          `json:"delivery_mode"`
	Priority      uint8          `json:"priority"`
	Expiration    string         `json:"expiration"`
	ReplyTo       string         `json:"reply_to"`
	Type          string         `json:"type"`
	AppID         string         `json:"app_id"`
	Offset        int64          `json:"x_stream_offset"`
}

func dump(args []string) error {
	fs := flag.NewFlagSet("dump", flag.ExitOnError)
	url := fs.String("url", "", "AMQP URL")
	queue := fs.String("queue", "", "stream name")
	out := fs.String("out", "", "dump (jsonl)")
	idle := fs.Duration("idle", 4*time.Second, "stop after this long without a delivery")
	fs.Parse(args)
	conn, err := amqp.Dial(*url)
	if err != nil {
		return err
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		return err
	}
	if err := ch.Qos(100, 0, false); err != nil {
		return err
	}
	dels, err := ch.Consume(*queue, "dump", false, false, false, false, amqp.Table{"x-stream-offset": "first"})
	if err != nil {
		return err
	}
	f, err := os.Create(*out)
	if err != nil {
		return err
	}
	defer f.Close()
	w := bufio.NewWriter(f)
	defer w.Flush()
	for n := 0; ; n++ {
		select {
		case d, ok := <-dels:
			if !ok {
				return fmt.Errorf("consumer closed after %d deliveries", n)
			}
			sum := sha256.Sum256(d.Body)
			off, _ := d.Headers["x-stream-offset"].(int64)
			rec := Delivery{N: n, MessageID: d.MessageId, Size: len(d.Body), SHA256: hex.EncodeToString(sum[:]), Headers: jsonHeaders(d.Headers),
				Timestamp: d.Timestamp.Unix(), CorrelationID: d.CorrelationId, ContentType: d.ContentType, ContentEnc: d.ContentEncoding,
				DeliveryMode: d.DeliveryMode, Priority: d.Priority, Expiration: d.Expiration, ReplyTo: d.ReplyTo, Type: d.Type, AppID: d.AppId, Offset: off}
			if d.Timestamp.IsZero() {
				rec.Timestamp = 0
			}
			b, _ := json.Marshal(rec)
			w.Write(append(b, '\n'))
			if err := d.Ack(false); err != nil {
				return err
			}
		case <-time.After(*idle):
			return nil
		}
	}
}
