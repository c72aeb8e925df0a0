package stream

import (
	"crypto/sha256"
	"encoding/hex"
	"math"
	"strconv"
	"strings"

	"github.com/storectl/storectl/pkg/format"
	"github.com/storectl/storectl/pkg/format/amqp10"
)

// Record is the `record` line of scan --records for one stream message.
// path, offset (byte offset of the entry), size (the entry, its header
// included) and msg_id are the fields every record has; stream_offset is
// the message's offset in the stream.
type Record struct {
	Path         string `json:"path"`
	Offset       int64  `json:"offset"`
	Size         int64  `json:"size"`
	MsgID        string `json:"msg_id"` // the AMQP message-id as text ("" when absent)
	Stream       string `json:"stream"` // the stream dir, relative to the data dir
	VHost        string `json:"vhost"`
	Queue        string `json:"queue"`
	StreamOffset uint64 `json:"stream_offset"`
	ChunkID      uint64 `json:"chunk_id"`
	ChunkPos     int64  `json:"chunk_pos"`
	Timestamp    int64  `json:"timestamp"` // the chunk's, ms
	Epoch        uint64 `json:"epoch"`
	CRCMatch     bool   `json:"crc_match"`
	Torn         bool   `json:"torn,omitempty"`
	Resynced     bool   `json:"resynced,omitempty"`
	SubBatch     bool   `json:"sub_batch,omitempty"`

	Sections           []string       `json:"sections"`
	Header             map[string]any `json:"header,omitempty"`
	MessageAnnotations map[string]any `json:"message_annotations,omitempty"`
	Properties         map[string]any `json:"properties"`
	// Headers are the application properties (what an AMQP 0-9-1
	// consumer gets as headers).
	Headers    map[string]any `json:"headers"`
	Exchange   *string        `json:"exchange,omitempty"`
	RoutingKey *string        `json:"routing_key,omitempty"`
	BodyKind   string         `json:"body_kind"`
	BodySize   int64          `json:"body_size"`
	BodySHA256 string         `json:"body_sha256"`
	// DecodeError says why the entry is not an AMQP 1.0 message.
	DecodeError string `json:"decode_error,omitempty"`
}

// Decoded is a stream message with its AMQP 1.0 sections decoded.
type Decoded struct {
	Msg  amqp10.Message
	Body []byte // the data sections' bytes (or the encoded amqp-value/sequence sections)
	Err  error
}

// DecodeMessage decodes m's body. The body (and the values) alias m.Body.
func DecodeMessage(m *Message) Decoded {
	am, err := amqp10.DecodeMessage(m.Body, m.EntryPos+m.EntrySize-int64(len(m.Body)))
	if err != nil {
		return Decoded{Err: format.WithPath(err, m.Path), Body: m.Body}
	}
	d := Decoded{Msg: am}
	data := am.Data()
	switch {
	case len(data) == 1:
		d.Body = data[0]
	case len(data) > 1:
		for _, b := range data {
			d.Body = append(d.Body, b...)
		}
	default:
		// amqp-value / amqp-sequence bodies: RabbitMQ hands 0-9-1 consumers
		// their AMQP encoding (mc_amqpl:convert_from/3).
		for _, s := range am.Sections {
			if s.Code == amqp10.SectionAmqpValue || s.Code == amqp10.SectionAmqpSequence {
				off := s.Offset - (m.EntryPos + m.EntrySize - int64(len(m.Body)))
				d.Body = append(d.Body, m.Body[off:off+int64(s.Size)]...)
			}
		}
	}
	return d
}

// MessageID renders an AMQP message-id as text: strings as they are,
// ulong in decimal, uuid canonical, binary in hex.
func MessageID(v amqp10.Value) string {
	switch v.Type {
	case amqp10.String, amqp10.Symbol:
		return string(v.Bytes)
	case amqp10.Ulong, amqp10.Uint, amqp10.Ushort, amqp10.Ubyte:
		return strconv.FormatUint(v.Num, 10)
	case amqp10.Long, amqp10.Int, amqp10.Short, amqp10.Byte:
		return strconv.FormatInt(v.Int(), 10)
	case amqp10.UUID:
		return amqp10.UUIDString(v.Bytes)
	case amqp10.Binary:
		return hex.EncodeToString(v.Bytes)
	case amqp10.Null:
		return ""
	}
	return v.String()
}

// NewRecord builds the record of m.
func NewRecord(m *Message) Record {
	r := Record{Path: m.Path, Offset: m.EntryPos, Size: m.EntrySize, StreamOffset: m.Offset,
		ChunkID: m.Chunk.ChunkID, ChunkPos: m.ChunkPos, Timestamp: m.Chunk.Timestamp, Epoch: m.Chunk.Epoch,
		CRCMatch: m.CRCMatch, Torn: m.Torn, Resynced: m.Resynced, SubBatch: m.SubBatch,
		Sections: []string{}, Properties: map[string]any{}, Headers: map[string]any{}}
	if m.Stream != nil {
		r.Stream, r.VHost, r.Queue = m.Stream.Dir, m.Stream.Name.VHost, m.Stream.Name.Queue
	}
	d := DecodeMessage(m)
	sum := sha256.Sum256(d.Body)
	r.BodySize, r.BodySHA256 = int64(len(d.Body)), hex.EncodeToString(sum[:])
	if d.Err != nil {
		r.DecodeError = d.Err.Error()
		r.BodyKind = "undecodable"
		return r
	}
	am := &d.Msg
	for _, s := range am.Sections {
		r.Sections = append(r.Sections, amqp10.SectionName(s.Code))
	}
	r.BodyKind = am.BodyKind()
	p := am.Properties()
	r.MsgID = MessageID(p.MessageID)
	for i, v := range p.Fields() {
		if !v.IsNull() {
			r.Properties[strings.ReplaceAll(amqp10.PropertyNames[i], "-", "_")] = JSONValue(v)
		}
	}
	if am.Section(amqp10.SectionHeader) != nil {
		h := am.Header()
		r.Header = map[string]any{}
		for i, v := range []amqp10.Value{h.Durable, h.Priority, h.TTL, h.FirstAcquirer, h.DeliveryCount} {
			if !v.IsNull() {
				r.Header[[]string{"durable", "priority", "ttl", "first_acquirer", "delivery_count"}[i]] = JSONValue(v)
			}
		}
	}
	if ma := am.MessageAnnotations(); ma.Type == amqp10.Map {
		r.MessageAnnotations = JSONMap(ma)
		if v, ok := ma.Lookup(amqp10.Symbol, "x-exchange"); ok && (v.Type == amqp10.String || v.Type == amqp10.Symbol) {
			s := string(v.Bytes)
			r.Exchange = &s
		}
		if v, ok := ma.Lookup(amqp10.Symbol, "x-routing-key"); ok && (v.Type == amqp10.String || v.Type == amqp10.Symbol) {
			s := string(v.Bytes)
			r.RoutingKey = &s
		}
	}
	if ap := am.ApplicationProperties(); ap.Type == amqp10.Map {
		r.Headers = JSONMap(ap)
	}
	return r
}

// JSONMap renders an AMQP map as a JSON object (keys as text).
func JSONMap(v amqp10.Value) map[string]any {
	out := make(map[string]any, len(v.Items)/2)
	for i := 0; i+1 < len(v.Items); i += 2 {
		k := v.Items[i]
		key := k.String()
		if k.Type == amqp10.String || k.Type == amqp10.Symbol {
			key = string(k.Bytes)
		}
		out[key] = JSONValue(v.Items[i+1])
	}
	return out
}

// JSONValue renders an AMQP value for JSON: numbers, booleans and text as
// themselves, binary as {"bin_hex": …}, uuid as text, lists and arrays
// as arrays, maps as objects, described values as {"descriptor", "value"}.
func JSONValue(v amqp10.Value) any {
	switch v.Type {
	case amqp10.Null:
		return nil
	case amqp10.Boolean:
		return v.Bool()
	case amqp10.Ubyte, amqp10.Ushort, amqp10.Uint, amqp10.Ulong:
		return v.Num
	case amqp10.Byte, amqp10.Short, amqp10.Int, amqp10.Long, amqp10.Timestamp:
		return v.Int()
	case amqp10.Float, amqp10.Double:
		f := v.Float()
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return strconv.FormatFloat(f, 'g', -1, 64)
		}
		return f
	case amqp10.Char:
		return string(rune(v.Num))
	case amqp10.UUID:
		return amqp10.UUIDString(v.Bytes)
	case amqp10.String, amqp10.Symbol:
		return string(v.Bytes)
	case amqp10.Binary:
		return map[string]any{"bin_hex": hex.EncodeToString(v.Bytes)}
	case amqp10.List, amqp10.Array:
		out := make([]any, 0, len(v.Items))
		for _, it := range v.Items {
			out = append(out, JSONValue(it))
		}
		return out
	case amqp10.Map:
		return JSONMap(v)
	case amqp10.Described:
		return map[string]any{"descriptor": JSONValue(v.Descriptor()), "value": JSONValue(v.Inner())}
	}
	return v.String()
}
