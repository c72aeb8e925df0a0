package salvage

import (
	"encoding/base64"
	"errors"
	"fmt"
	"sort"
	"strings"
	"unicode/utf8"

	rfmt "github.com/storectl/storectl/pkg/format/rabbitmq"
)

// Selection names which messages an export takes.
type Selection string

// The selections of --select.
const (
	SelectAll             Selection = "all"
	SelectLost            Selection = "lost"
	SelectAtRisk          Selection = "at-risk"
	SelectUnreferenced    Selection = "unreferenced"
	SelectAfterCorruption Selection = "after-corruption"
)

// Store kinds in Message.Store.
const (
	StoreRabbitMQ = "rabbitmq"
	StoreRocketMQ = "rocketmq"
)

// ErrUnsupported is returned for a selection the store kind has no
// notion of.
var ErrUnsupported = errors.New("salvage: selection not supported for this store kind")

// Supported refuses the selections store has no notion of: at-risk
// (scanner misreads of RabbitMQ versions) and unreferenced (records no
// queue index references) are RabbitMQ's.
func Supported(store string, sels []Selection) error {
	if store != StoreRocketMQ {
		return nil
	}
	for _, s := range sels {
		if s == SelectAtRisk || s == SelectUnreferenced || s == SelectCRCDamaged {
			return fmt.Errorf("%w: --select %s is a RabbitMQ notion (RocketMQ has all, lost, after-corruption)", ErrUnsupported, s)
		}
	}
	return nil
}

// ParseSelections parses a comma-separated --select value.
func ParseSelections(s string) ([]Selection, error) {
	var out []Selection
	seen := map[Selection]bool{}
	for _, p := range strings.Split(s, ",") {
		sel := Selection(strings.TrimSpace(p))
		switch sel {
		case SelectAll, SelectLost, SelectAtRisk, SelectUnreferenced, SelectAfterCorruption, SelectCRCDamaged:
		default:
			return nil, fmt.Errorf("--select %q: want all, lost, at-risk, unreferenced, after-corruption or crc-damaged", p)
		}
		if !seen[sel] {
			seen[sel] = true
			out = append(out, sel)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out, nil
}

// Message is one line of messages.jsonl. Fields of the other store kind
// are omitted.
type Message struct {
	Store  string `json:"store"`  // StoreRabbitMQ or StoreRocketMQ
	MsgID  string `json:"msg_id"` // RabbitMQ: 32 hex digits; RocketMQ: the offset msg id
	Path   string `json:"path"`   // record's file, relative to the data dir
	Offset int64  `json:"offset"` // record's offset in that file
	// RecordSize is the whole record in bytes, framing included.
	RecordSize int64 `json:"record_size"`

	// RabbitMQ.
	// Location is where the message lives: shared-store (Path is an
	// .rdq), queue-store (Path is the queue's .qs, Offset the entry's
	// header; IndexPath/IndexOffset the .qi slot pointing at it) or
	// embedded (Path is the v1 .idx segment or journal.jif holding the
	// publish record at Offset).
	Location    string   `json:"location,omitempty"`
	IndexPath   string   `json:"index_path,omitempty"`
	IndexOffset *int64   `json:"index_offset,omitempty"`
	VHost       string   `json:"vhost,omitempty"`
	Queues      []string `json:"queues,omitempty"` // one name per reference
	Status      string   `json:"status,omitempty"` // referenced | unreferenced | unknown | dropped at recovery: <reason>
	Term        string   `json:"term,omitempty"`   // basic_message | mc
	Exchange    *string  `json:"exchange,omitempty"`
	RoutingKeys []string `json:"routing_keys,omitempty"`
	// PropertiesBin is the AMQP 0-9-1 content-header property list exactly
	// as stored (base64 in JSON); Publish sends these properties. For a
	// stream message: the properties the broker delivers it with.
	PropertiesBin []byte `json:"properties_bin,omitempty"`

	// RabbitMQ streams (Location "stream"): the stream dir, the message's
	// offset in the stream, its chunk's id and timestamp (ms), whether the
	// chunk's data matches its CRC, and whether it is a whole entry of a
	// torn chunk (CRC not checkable).
	Stream         string  `json:"stream,omitempty"`
	StreamOffset   *uint64 `json:"stream_offset,omitempty"`
	ChunkID        *uint64 `json:"chunk_id,omitempty"`
	ChunkTimestamp int64   `json:"chunk_timestamp,omitempty"`
	CRCMatch       *bool   `json:"crc_match,omitempty"`
	Torn           bool    `json:"torn,omitempty"`

	// RabbitMQ quorum queues (Location "quorum"): the queue type, the
	// replica's ra UId, the enqueue entry's Raft index and term, whether
	// the entry matches its checksum or CRC (CRCMatch), and whether the
	// next start redelivers it (delivered, not settled in the log).
	QueueType   string  `json:"queue_type,omitempty"`
	UID         string  `json:"uid,omitempty"`
	RaIndex     *uint64 `json:"raft_index,omitempty"`
	RaTerm      *uint64 `json:"raft_term,omitempty"`
	Redelivered bool    `json:"redelivered,omitempty"`

	// RocketMQ.
	Topic          string `json:"topic,omitempty"`
	QueueID        *int32 `json:"queue_id,omitempty"`
	QueueOffset    *int64 `json:"queue_offset,omitempty"`
	PhyOffset      *int64 `json:"phy_offset,omitempty"`
	Tags           string `json:"tags,omitempty"`
	Keys           string `json:"keys,omitempty"`
	StoreTimestamp int64  `json:"store_timestamp,omitempty"`
	BornTimestamp  int64  `json:"born_timestamp,omitempty"`

	// Properties: RabbitMQ basic properties (PropsJSON), RocketMQ message
	// properties (name -> value).
	Properties map[string]any `json:"properties,omitempty"`

	BodyFile string `json:"body_file"` // relative to the out dir
	Size     int64  `json:"size"`      // body bytes
	SHA256   string `json:"sha256"`    // of the body

	// SelectedBy lists every requested selection the message matches
	// (with all: every category it falls in).
	SelectedBy []Selection `json:"selected_by"`
	Why        []string    `json:"why"` // one sentence per reason
}

// PropsJSON renders AMQP basic properties for messages.jsonl: absent
// properties are left out; headers are a list of {name, type, value}
// in wire order (type is the AMQP field type letter).
func PropsJSON(p *rfmt.BasicProperties) map[string]any {
	if p == nil {
		return nil
	}
	out := map[string]any{}
	str := func(k string, v *string) {
		if v != nil {
			out[k] = *v
		}
	}
	str("content_type", p.ContentType)
	str("content_encoding", p.ContentEncoding)
	if p.Headers != nil {
		out["headers"] = tableJSON(p.Headers)
	}
	if p.DeliveryMode != nil {
		out["delivery_mode"] = *p.DeliveryMode
	}
	if p.Priority != nil {
		out["priority"] = *p.Priority
	}
	str("correlation_id", p.CorrelationID)
	str("reply_to", p.ReplyTo)
	str("expiration", p.Expiration)
	str("message_id", p.MessageID)
	if p.Timestamp != nil {
		out["timestamp"] = *p.Timestamp
	}
	str("type", p.Type)
	str("user_id", p.UserID)
	str("app_id", p.AppID)
	str("cluster_id", p.ClusterID)
	return out
}

func tableJSON(t rfmt.Table) []map[string]any {
	out := make([]map[string]any, 0, len(t))
	for _, f := range t {
		v := valueJSON(f.Value)
		v["name"] = f.Name
		out = append(out, v)
	}
	return out
}

func valueJSON(v rfmt.FieldValue) map[string]any {
	m := map[string]any{"type": string(rune(v.Type))}
	switch x := v.V.(type) {
	case []byte:
		if utf8.Valid(x) {
			m["value"] = string(x)
		} else {
			m["value_base64"] = base64.StdEncoding.EncodeToString(x)
		}
	case []rfmt.FieldValue:
		a := make([]map[string]any, 0, len(x))
		for _, e := range x {
			a = append(a, valueJSON(e))
		}
		m["value"] = a
	case rfmt.Table:
		m["value"] = tableJSON(x)
	case rfmt.Decimal:
		m["value"] = map[string]any{"scale": x.Scale, "unscaled": x.Unscaled}
	default:
		m["value"] = x
	}
	return m
}
