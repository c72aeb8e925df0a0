package salvage

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Filter narrows a selection to the messages of some queues or topics,
// some message ids, and a time window: how people ask for "the messages
// of orders between 02:00 and 02:30". Every set criterion must match.
type Filter struct {
	Queues []string // RabbitMQ queue names (a message referenced by any)
	Topics []string // RocketMQ TOPIC or TOPIC:QUEUEID
	MsgIDs []string // RabbitMQ msg id; RocketMQ offset msg id or UNIQ_KEY
	Since  *time.Time
	Until  *time.Time // exclusive
	// Time is which time Since/Until compare: TimeStore (RocketMQ
	// store_timestamp) or TimePublish (RocketMQ born_timestamp, RabbitMQ
	// the AMQP timestamp property set by the publisher).
	Time string
}

// Times Since/Until compare.
const (
	TimeStore   = "store"
	TimePublish = "publish"
)

// Empty reports a filter that keeps everything.
func (f *Filter) Empty() bool {
	return f == nil || (len(f.Queues) == 0 && len(f.Topics) == 0 && len(f.MsgIDs) == 0 && f.Since == nil && f.Until == nil)
}

// String is the canonical text of the filter (an export's Spec.Filters).
func (f *Filter) String() string {
	if f.Empty() {
		return ""
	}
	var p []string
	if len(f.Queues) > 0 {
		p = append(p, "--queue "+strings.Join(f.Queues, ","))
	}
	if len(f.Topics) > 0 {
		p = append(p, "--topic "+strings.Join(f.Topics, ","))
	}
	if len(f.MsgIDs) > 0 {
		p = append(p, "--msg-id "+strings.Join(f.MsgIDs, ","))
	}
	if f.Since != nil {
		p = append(p, "--since "+f.Since.UTC().Format(time.RFC3339Nano))
	}
	if f.Until != nil {
		p = append(p, "--until "+f.Until.UTC().Format(time.RFC3339Nano))
	}
	if f.Since != nil || f.Until != nil {
		p = append(p, "--time "+f.Time)
	}
	return strings.Join(p, " ")
}

// Match reports whether m passes every criterion.
func (f *Filter) Match(m *Message) bool {
	if f.Empty() {
		return true
	}
	if len(f.Queues) > 0 && !slices.ContainsFunc(m.Queues, func(q string) bool { return slices.Contains(f.Queues, q) }) {
		return false
	}
	if len(f.Topics) > 0 {
		ok := false
		for _, t := range f.Topics {
			name, qid, hasQID := strings.Cut(t, ":")
			if name == m.Topic && (!hasQID || (m.QueueID != nil && qid == strconv.Itoa(int(*m.QueueID)))) {
				ok = true
			}
		}
		if !ok {
			return false
		}
	}
	if len(f.MsgIDs) > 0 {
		uniq, _ := m.Properties["UNIQ_KEY"].(string)
		if !slices.ContainsFunc(f.MsgIDs, func(id string) bool {
			return strings.EqualFold(id, m.MsgID) || (uniq != "" && strings.EqualFold(id, uniq))
		}) {
			return false
		}
	}
	if f.Since != nil || f.Until != nil {
		t, ok := f.timeOf(m)
		if !ok || (f.Since != nil && t.Before(*f.Since)) || (f.Until != nil && !t.Before(*f.Until)) {
			return false
		}
	}
	return true
}

// timeOf is the message's time Since/Until compare, if it has one.
func (f *Filter) timeOf(m *Message) (time.Time, bool) {
	switch {
	case m.Store == StoreRocketMQ && f.Time == TimePublish:
		return time.UnixMilli(m.BornTimestamp), m.BornTimestamp > 0
	case m.Store == StoreRocketMQ:
		return time.UnixMilli(m.StoreTimestamp), m.StoreTimestamp > 0
	}
	// RabbitMQ: the AMQP timestamp property (seconds), when the publisher set it.
	switch ts := m.Properties["timestamp"].(type) {
	case uint64:
		return time.Unix(int64(ts), 0), true
	case int64:
		return time.Unix(ts, 0), true
	case float64:
		return time.Unix(int64(ts), 0), true
	}
	return time.Time{}, false
}

// ParseTime reads a --since/--until value: RFC 3339, or "2006-01-02
// 15:04[:05]" / "2006-01-02" in loc, or Unix milliseconds.
func ParseTime(s string, loc *time.Location) (time.Time, error) {
	if ms, err := strconv.ParseInt(s, 10, 64); err == nil {
		return time.UnixMilli(ms), nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	for _, layout := range []string{"2006-01-02 15:04:05", "2006-01-02T15:04:05", "2006-01-02 15:04", "2006-01-02T15:04", "2006-01-02"} {
		if t, err := time.ParseInLocation(layout, s, loc); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("%q is not a time: want RFC 3339 (2026-01-02T02:00:00Z), 2026-01-02 02:00 (local time) or Unix milliseconds", s)
}
