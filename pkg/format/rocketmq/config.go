package rocketmq

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/storectl/storectl/pkg/format"
)

// Broker config files under <store>/config/ (BrokerPathConfigHelper).
// ConfigManager.persist writes them through MixAll.string2File: the old
// content is copied to <name>.bak, then the file is rewritten in place,
// without fsync (apache/rocketmq rocketmq-all-5.3.3
// common/src/main/java/org/apache/rocketmq/common/MixAll.java
// string2File). ConfigManager.load falls back to the .bak only when the
// file is empty or does not decode.
const (
	ConsumerOffsetFile    = "config/consumerOffset.json"
	LMQConsumerOffsetFile = "config/lmqConsumerOffset.json"
	DelayOffsetFile       = "config/delayOffset.json"
	TopicsFile            = "config/topics.json"
	SubscriptionGroupFile = "config/subscriptionGroup.json"
	BakSuffix             = ".bak"
)

// DataVersion is RocketMQ's DataVersion (counter, stateVersion, timestamp).
type DataVersion struct {
	Counter      int64
	StateVersion int64
	Timestamp    int64
}

// QueueOffset is one committed offset of an offset table: for
// consumerOffset.json the offset group Group has consumed up to in
// Topic/QueueID; for delayOffset.json Topic is "" and QueueID is the
// delay level.
type QueueOffset struct {
	Key     string // the table key ("topic@group"; "" for delayOffset)
	Topic   string
	Group   string
	QueueID int32
	Offset  int64
	// Start and End locate the number in the file, for a repair that
	// rewrites it and nothing else.
	Start, End int64
}

// OffsetTable is a decoded consumerOffset.json or delayOffset.json.
type OffsetTable struct {
	DataVersion DataVersion
	Offsets     []QueueOffset // sorted by topic, group, queue
}

// DecodeConsumerOffsets decodes consumerOffset.json (ConsumerOffsetManager:
// "offsetTable": {"topic@group": {queueId: offset}}, fastjson's bare
// integer keys). A key without '@' is kept with Topic = the whole key.
func DecodeConsumerOffsets(b []byte) (OffsetTable, error) {
	return decodeOffsets(b, true)
}

// DecodeDelayOffsets decodes delayOffset.json (ScheduleMessageService:
// "offsetTable": {delayLevel: offset}).
func DecodeDelayOffsets(b []byte) (OffsetTable, error) {
	return decodeOffsets(b, false)
}

func decodeOffsets(b []byte, byGroup bool) (OffsetTable, error) {
	var t OffsetTable
	doc, err := ParseFastJSON(b)
	if err != nil {
		return t, err
	}
	if doc.Kind != JSONObject {
		return t, format.Corrupt(doc.Start, "json", fmt.Errorf("%w: not an object", format.ErrInvalid))
	}
	if dv, ok := doc.Get("dataVersion"); ok {
		if t.DataVersion, err = decodeDataVersion(dv); err != nil {
			return t, err
		}
	}
	tab, ok := doc.Get("offsetTable")
	if !ok || tab.Kind == JSONNull {
		return t, nil
	}
	if tab.Kind != JSONObject {
		return t, format.Corrupt(tab.Start, "offsetTable", fmt.Errorf("%w: not an object", format.ErrInvalid))
	}
	add := func(key string, qid string, at int64, v *JSONValue) error {
		q, err := strconv.ParseInt(qid, 10, 32)
		if err != nil {
			return format.Corrupt(at, "queueId", fmt.Errorf("%w: %q", format.ErrInvalid, qid))
		}
		off, err := v.Int()
		if err != nil {
			return err
		}
		o := QueueOffset{Key: key, QueueID: int32(q), Offset: off, Start: v.Start, End: v.End}
		if byGroup {
			o.Topic, o.Group = key, ""
			if i := strings.LastIndexByte(key, '@'); i >= 0 {
				o.Topic, o.Group = key[:i], key[i+1:]
			}
		}
		t.Offsets = append(t.Offsets, o)
		return nil
	}
	for _, m := range tab.Members {
		if !byGroup {
			if err := add("", m.Key, m.KeyStart, &m.Value); err != nil {
				return t, err
			}
			continue
		}
		if m.Value.Kind != JSONObject {
			return t, format.Corrupt(m.Value.Start, m.Key, fmt.Errorf("%w: not an object", format.ErrInvalid))
		}
		for _, q := range m.Value.Members {
			if err := add(m.Key, q.Key, q.KeyStart, &q.Value); err != nil {
				return t, err
			}
		}
	}
	sort.SliceStable(t.Offsets, func(i, j int) bool {
		a, b := t.Offsets[i], t.Offsets[j]
		if a.Topic != b.Topic {
			return a.Topic < b.Topic
		}
		if a.Group != b.Group {
			return a.Group < b.Group
		}
		return a.QueueID < b.QueueID
	})
	return t, nil
}

func decodeDataVersion(v *JSONValue) (DataVersion, error) {
	var dv DataVersion
	if v.Kind != JSONObject {
		return dv, format.Corrupt(v.Start, "dataVersion", fmt.Errorf("%w: not an object", format.ErrInvalid))
	}
	for _, f := range []struct {
		name string
		dst  *int64
	}{{"counter", &dv.Counter}, {"stateVersion", &dv.StateVersion}, {"timestamp", &dv.Timestamp}} {
		if x, ok := v.Get(f.name); ok && x.Kind == JSONNumber {
			n, err := x.Int()
			if err != nil {
				return dv, err
			}
			*f.dst = n
		}
	}
	return dv, nil
}

// TopicConfig is the part of a topics.json entry storectl uses.
type TopicConfig struct {
	Name           string
	ReadQueueNums  int32
	WriteQueueNums int32
}

// DecodeTopics decodes topics.json (TopicConfigSerializeWrapper:
// "topicConfigTable": {name: {readQueueNums, writeQueueNums, ...}}).
func DecodeTopics(b []byte) ([]TopicConfig, DataVersion, error) {
	var dv DataVersion
	doc, err := ParseFastJSON(b)
	if err != nil {
		return nil, dv, err
	}
	if doc.Kind != JSONObject {
		return nil, dv, format.Corrupt(doc.Start, "json", fmt.Errorf("%w: not an object", format.ErrInvalid))
	}
	if v, ok := doc.Get("dataVersion"); ok {
		if dv, err = decodeDataVersion(v); err != nil {
			return nil, dv, err
		}
	}
	tab, ok := doc.Get("topicConfigTable")
	if !ok || tab.Kind != JSONObject {
		return nil, dv, nil
	}
	var out []TopicConfig
	for _, m := range tab.Members {
		tc := TopicConfig{Name: m.Key}
		for _, f := range []struct {
			name string
			dst  *int32
		}{{"readQueueNums", &tc.ReadQueueNums}, {"writeQueueNums", &tc.WriteQueueNums}} {
			if x, ok := m.Value.Get(f.name); ok {
				n, err := x.Int()
				if err != nil {
					return nil, dv, err
				}
				*f.dst = int32(n)
			}
		}
		out = append(out, tc)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, dv, nil
}

// SetOffsets returns b with the numbers of the given offsets (located by
// Start/End, as decoded from b) replaced by their new values; every other
// byte stays (a number whose value does not change keeps its literal).
// Offsets must come from decoding b itself.
func SetOffsets(b []byte, set []QueueOffset) ([]byte, error) {
	sorted := append([]QueueOffset(nil), set...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Start < sorted[j].Start })
	out := make([]byte, 0, len(b)+8*len(set))
	at := int64(0)
	for _, o := range sorted {
		if o.Start < at || o.End > int64(len(b)) || o.Start >= o.End {
			return nil, fmt.Errorf("offset of %s/%d at %d..%d does not belong to this file", o.Key, o.QueueID, o.Start, o.End)
		}
		out = append(out, b[at:o.Start]...)
		if old, err := strconv.ParseInt(string(b[o.Start:o.End]), 10, 64); err == nil && old == o.Offset {
			out = append(out, b[o.Start:o.End]...) // unchanged: keep the literal as written
		} else {
			out = strconv.AppendInt(out, o.Offset, 10)
		}
		at = o.End
	}
	return append(out, b[at:]...), nil
}
