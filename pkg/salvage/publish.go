package salvage

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	rfmt "github.com/storectl/storectl/pkg/format/rabbitmq"
)

// PublishOptions tune Publish.
type PublishOptions struct {
	URL string // amqp://user:pass@host:port/vhost
	// ConfirmTimeout bounds the wait for one publisher confirm; 0 = 30 s.
	ConfirmTimeout time.Duration
	// Progress, when set, is called after each message.
	Progress func(done, total int)
	// Queue, when set, sends every message to this queue or stream through
	// the default exchange (routing key = Queue) instead of its recorded
	// exchange and routing key.
	Queue string
}

// route is where m goes: its recorded exchange and first routing key, or
// the default exchange and o.Queue.
func (o PublishOptions) route(m *Message) (exchange, key string, ok bool) {
	if o.Queue != "" {
		return "", o.Queue, true
	}
	if m.Exchange == nil {
		return "", "", false
	}
	return *m.Exchange, firstKey(m), true
}

// PublishReport says what Publish did.
type PublishReport struct {
	Total            int      `json:"total"`             // RabbitMQ messages in the export
	Published        int      `json:"published"`         // confirmed in this run
	AlreadyConfirmed int      `json:"already_confirmed"` // skipped: in the confirm log
	Failed           int      `json:"failed"`            // nacked, returned (unroutable) or not sent
	Failures         []string `json:"failures,omitempty"`
	ConfirmLog       string   `json:"confirm_log"`
}

// ConfirmEntry is one line of confirmed.jsonl.
type ConfirmEntry struct {
	Key        string    `json:"key"` // ConfirmKey of the message
	MsgID      string    `json:"msg_id"`
	SHA256     string    `json:"sha256"`
	Exchange   string    `json:"exchange"`
	RoutingKey string    `json:"routing_key"`
	At         time.Time `json:"at"`
}

// ConfirmKey identifies a message across runs: where its record lies and
// the hash of its body.
func ConfirmKey(m *Message) string {
	return fmt.Sprintf("%s:%s@%d:%s:%s", m.Store, m.Path, m.Offset, m.MsgID, m.SHA256)
}

// maxPublishFailures stops a publish after this many failed messages in a
// row: something is wrong with the broker or the topology, and every
// further message would fail the same way.
const maxPublishFailures = 20

// Publish re-publishes the RabbitMQ messages of the export in outDir:
// to the original exchange with the first routing key (CC/BCC keys are
// in the headers, which are sent as stored), with the original
// properties and headers, delivery mode 2 (persistent), mandatory, one at
// a time with publisher confirms. Each confirmed message is appended and
// fsynced to confirmed.jsonl before the next is sent; messages already in
// that log are skipped, so a publish that was interrupted resumes. A
// message the broker returns as unroutable or nacks is a failure and is
// not logged. RocketMQ messages are skipped.
func Publish(ctx context.Context, outDir string, o PublishOptions) (*PublishReport, error) {
	msgs, err := ReadMessages(outDir)
	if err != nil {
		return nil, err
	}
	logPath := filepath.Join(outDir, ConfirmedFile)
	rep := &PublishReport{ConfirmLog: logPath}
	done, err := readConfirmed(logPath)
	if err != nil {
		return nil, err
	}
	var todo []Message
	for _, m := range msgs {
		if m.Store != StoreRabbitMQ {
			continue
		}
		rep.Total++
		if done[ConfirmKey(&m)] {
			rep.AlreadyConfirmed++
			continue
		}
		todo = append(todo, m)
	}
	if len(todo) == 0 {
		return rep, nil
	}
	timeout := o.ConfirmTimeout
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	conn, err := amqp.DialConfig(o.URL, amqp.Config{Dial: amqp.DefaultDial(timeout), Properties: amqp.Table{"connection_name": "storectl salvage"}})
	if err != nil {
		return rep, fmt.Errorf("connect: %w", err)
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		return rep, err
	}
	defer ch.Close()
	if err := ch.Confirm(false); err != nil {
		return rep, fmt.Errorf("confirm.select: %w", err)
	}
	returns := ch.NotifyReturn(make(chan amqp.Return, 16))
	logf, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return rep, err
	}
	defer logf.Close()
	inRow := 0
	for i := range todo {
		if err := ctx.Err(); err != nil {
			return rep, err
		}
		m := &todo[i]
		ex, key, routed := o.route(m)
		err := errors.New("no exchange recorded")
		if routed {
			err = publishOne(ctx, ch, outDir, m, ex, key, returns, timeout)
		}
		if err == nil {
			line, _ := json.Marshal(ConfirmEntry{Key: ConfirmKey(m), MsgID: m.MsgID, SHA256: m.SHA256,
				Exchange: ex, RoutingKey: key, At: time.Now().UTC()})
			if _, err := logf.Write(append(line, '\n')); err != nil {
				return rep, err
			}
			if err := logf.Sync(); err != nil {
				return rep, err
			}
			rep.Published++
			inRow = 0
		} else {
			rep.Failed++
			rep.Failures = append(rep.Failures, fmt.Sprintf("%s@%d %s: %v", m.Path, m.Offset, m.MsgID, err))
			if ch.IsClosed() || conn.IsClosed() {
				rep.Failed += len(todo) - i - 1
				return rep, fmt.Errorf("the broker closed the channel: %w", err)
			}
			if inRow++; inRow >= maxPublishFailures {
				rep.Failed += len(todo) - i - 1
				return rep, fmt.Errorf("%d publishes failed in a row; stopping", inRow)
			}
		}
		if o.Progress != nil {
			o.Progress(i+1, len(todo))
		}
	}
	return rep, nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func firstKey(m *Message) string {
	if len(m.RoutingKeys) == 0 {
		return ""
	}
	return m.RoutingKeys[0]
}

// errReturned marks a message the broker could not route.
var errReturned = errors.New("returned by the broker as unroutable (no queue bound for this exchange and routing key)")

func publishOne(ctx context.Context, ch *amqp.Channel, outDir string, m *Message, exchange, key string, returns chan amqp.Return, timeout time.Duration) error {
	body, err := ReadBody(outDir, m)
	if err != nil {
		return err
	}
	pub, err := Publishing(m.PropertiesBin, body)
	if err != nil {
		return err
	}
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	dc, err := ch.PublishWithDeferredConfirmWithContext(cctx, exchange, key, true, false, pub)
	if err != nil {
		return err
	}
	ack, err := dc.WaitContext(cctx)
	if err != nil {
		return fmt.Errorf("no confirm: %w", err)
	}
	// A basic.return precedes the ack of its message on the channel, and
	// the library hands it to the returns channel before it processes the
	// ack; with one message in flight any return is this message's.
	select {
	case <-returns:
		return errReturned
	default:
	}
	if !ack {
		return errors.New("nacked by the broker")
	}
	return nil
}

// Publishing builds the AMQP message from the stored property list: every
// property as stored (headers with their original field types), but
// delivery mode 2. cluster-id (deprecated, not settable through the
// client) is dropped.
func Publishing(propsBin, body []byte) (amqp.Publishing, error) {
	p := amqp.Publishing{Body: body, DeliveryMode: amqp.Persistent}
	if len(propsBin) == 0 {
		return p, nil
	}
	bp, err := rfmt.DecodeBasicProperties(propsBin, 0)
	if err != nil {
		return p, err
	}
	s := func(v *string) string {
		if v == nil {
			return ""
		}
		return *v
	}
	p.ContentType, p.ContentEncoding = s(bp.ContentType), s(bp.ContentEncoding)
	p.CorrelationId, p.ReplyTo, p.Expiration = s(bp.CorrelationID), s(bp.ReplyTo), s(bp.Expiration)
	p.MessageId, p.Type, p.UserId, p.AppId = s(bp.MessageID), s(bp.Type), s(bp.UserID), s(bp.AppID)
	if bp.Priority != nil {
		p.Priority = *bp.Priority
	}
	if bp.Timestamp != nil {
		p.Timestamp = time.Unix(int64(*bp.Timestamp), 0)
	}
	if bp.Headers != nil {
		p.Headers = amqpTable(bp.Headers)
	}
	return p, nil
}

func amqpTable(t rfmt.Table) amqp.Table {
	out := amqp.Table{}
	for _, f := range t {
		out[f.Name] = amqpValue(f.Value)
	}
	return out
}

// amqpValue maps a decoded field value to the Go type amqp091-go encodes
// with the same field type letter.
func amqpValue(v rfmt.FieldValue) any {
	switch x := v.V.(type) {
	case []byte:
		if v.Type == 'x' {
			return x
		}
		return string(x)
	case int64:
		switch v.Type {
		case 'b':
			return int8(x)
		case 'B':
			return uint8(x)
		case 's':
			return int16(x)
		case 'u':
			return uint16(x)
		case 'I':
			return int32(x)
		case 'i':
			return uint32(x)
		}
		return x
	case float64:
		if v.Type == 'f' {
			return float32(x)
		}
		return x
	case uint64:
		return time.Unix(int64(x), 0)
	case rfmt.Decimal:
		return amqp.Decimal{Scale: x.Scale, Value: int32(x.Unscaled)}
	case []rfmt.FieldValue:
		a := make([]any, 0, len(x))
		for _, e := range x {
			a = append(a, amqpValue(e))
		}
		return a
	case rfmt.Table:
		return amqpTable(x)
	}
	return v.V // bool, nil
}

// readConfirmed loads the keys of confirmed.jsonl (missing file: none).
// A torn last line (the process died mid-write) is ignored: that message
// was not confirmed in the log and is sent again.
func readConfirmed(p string) (map[string]bool, error) {
	out := map[string]bool{}
	f, err := os.Open(p)
	if errors.Is(err, os.ErrNotExist) {
		return out, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<16), 1<<20)
	for sc.Scan() {
		if strings.TrimSpace(sc.Text()) == "" {
			continue
		}
		var e ConfirmEntry
		if json.Unmarshal(sc.Bytes(), &e) == nil && e.Key != "" {
			out[e.Key] = true
		}
	}
	return out, sc.Err()
}
