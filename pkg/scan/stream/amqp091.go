package stream

import (
	"encoding/base64"
	"strconv"
	"unicode/utf8"

	"github.com/storectl/storectl/pkg/format/amqp10"
	rfmt "github.com/storectl/storectl/pkg/format/rabbitmq"
)

// Delivery091 is what an AMQP 0-9-1 consumer of RabbitMQ gets for a
// stream message: its basic properties (without the x-stream-offset
// header the broker adds to every delivery) and body.
type Delivery091 struct {
	Properties rfmt.BasicProperties
	Body       []byte
}

// To091 converts a stream message the way the broker of rules converts
// it for an AMQP 0-9-1 consumer: mc_amqpl:convert_from(mc_amqp, …) from
// RabbitMQ 3.13 (v4.0.5 deps/rabbit/src/mc_amqpl.erl 61-244), before that
// rabbit_msg_record:to_amqp091/1 (v3.10.8 deps/rabbit/src/rabbit_msg_record.erl
// 219-300). Values the broker cannot convert are left out.
func To091(d Decoded, rules Rules) Delivery091 {
	if rules.MsgRecord {
		return to091MsgRecord(d)
	}
	return to091MC(d)
}

func str(s string) *string { return &s }

func unwrapStr(v amqp10.Value) *string {
	switch v.Type {
	case amqp10.String, amqp10.Symbol, amqp10.Binary:
		return str(string(v.Bytes))
	}
	return nil
}

// shortstr: a UTF-8 string of at most 255 bytes (?IS_SHORTSTR_LEN).
func shortstr(v amqp10.Value) *string {
	if v.Type == amqp10.String && len(v.Bytes) <= 255 {
		return str(string(v.Bytes))
	}
	return nil
}

func u8ptr(n uint64) *uint8 { v := uint8(n); return &v }

func mapGet(m amqp10.Value, t amqp10.Type, key string) (amqp10.Value, bool) {
	if m.Type != amqp10.Map {
		return amqp10.Value{}, false
	}
	return m.Lookup(t, key)
}

func to091MC(d Decoded) Delivery091 {
	m := &d.Msg
	var p rfmt.BasicProperties
	h := m.Section(amqp10.SectionHeader)
	hf := m.Header()
	ma := m.MessageAnnotations()
	switch {
	case h != nil && hf.Durable.Type == amqp10.Boolean && hf.Durable.Bool():
		p.DeliveryMode = u8ptr(2)
	case h != nil:
		p.DeliveryMode = u8ptr(1)
	default:
		if v, ok := mapGet(ma, amqp10.Symbol, "x-basic-delivery-mode"); ok && !v.IsNull() {
			p.DeliveryMode = u8ptr(v.Num)
		}
	}
	if h != nil && !hf.Priority.IsNull() {
		p.Priority = u8ptr(hf.Priority.Num)
	} else if v, ok := mapGet(ma, amqp10.Symbol, "x-basic-priority"); ok && !v.IsNull() {
		p.Priority = u8ptr(v.Num)
	}
	if h != nil && !hf.TTL.IsNull() {
		p.Expiration = str(strconv.FormatUint(hf.TTL.Num, 10))
	} else if v, ok := mapGet(ma, amqp10.Symbol, "x-basic-expiration"); ok {
		p.Expiration = unwrapStr(v)
	}
	if m.BodyKind() == "data" || m.BodyKind() == "" {
		if v, ok := mapGet(ma, amqp10.Symbol, "x-basic-type"); ok {
			p.Type = unwrapStr(v)
		}
	} else {
		p.Type = str("amqp-1.0")
	}
	var headers rfmt.Table
	if ap := m.ApplicationProperties(); ap.Type == amqp10.Map {
		for _, kv := range ap.Pairs() {
			if kv[0].Type != amqp10.String || len(kv[0].Bytes) > 255 {
				continue
			}
			if fv, ok := fieldMC(kv[1]); ok {
				headers = append(headers, rfmt.Field{Name: string(kv[0].Bytes), Value: fv})
			}
		}
	}
	pr := m.Properties()
	var mid, cid *string
	headers, mid = messageIDMC(pr.MessageID, "x-message-id", headers)
	headers, cid = messageIDMC(pr.CorrelationID, "x-correlation-id", headers)
	var xh rfmt.Table
	for _, kv := range ma.Pairs() {
		k := kv[0]
		if k.Type != amqp10.Symbol {
			continue
		}
		key := string(k.Bytes)
		switch {
		case key == "x-cc":
			if fv, ok := fieldMC(kv[1]); ok {
				xh = append(xh, rfmt.Field{Name: "CC", Value: fv})
			}
		case key == "x-opt-rabbitmq-received-time" && kv[1].Type == amqp10.Timestamp:
			xh = append(xh, rfmt.Field{Name: "timestamp_in_ms", Value: rfmt.FieldValue{Type: 'l', V: kv[1].Int()}})
		case key == "x-opt-deaths":
			// converted to x-death by the broker; not reproduced here
		case len(key) >= 2 && key[:2] == "x-" && len(key) <= 255 && !internalHeader(key):
			if fv, ok := fieldMC(kv[1]); ok {
				xh = append(xh, rfmt.Field{Name: key, Value: fv})
			}
		}
	}
	if all := append(xh, headers...); len(all) > 0 {
		p.Headers = all
	}
	p.MessageID, p.CorrelationID = mid, cid
	if pr.UserID.Type == amqp10.Binary && len(pr.UserID.Bytes) <= 255 && utf8NoNull(pr.UserID.Bytes) {
		p.UserID = str(string(pr.UserID.Bytes))
	}
	p.ReplyTo = shortstr(pr.ReplyTo)
	p.AppID = shortstr(pr.GroupID)
	p.ContentType = unwrapStr(pr.ContentType)
	p.ContentEncoding = unwrapStr(pr.ContentEncoding)
	if pr.CreationTime.Type == amqp10.Timestamp {
		ts := uint64(pr.CreationTime.Int() / 1000)
		p.Timestamp = &ts
	}
	return Delivery091{Properties: p, Body: d.Body}
}

func internalHeader(k string) bool {
	return len(k) >= 8 && k[:8] == "x-basic-" || k == "x-routing-key" || k == "x-exchange" || k == "x-death"
}

func utf8NoNull(b []byte) bool {
	if !utf8.Valid(b) {
		return false
	}
	for _, c := range b {
		if c == 0 {
			return false
		}
	}
	return true
}

// messageIDMC is mc_amqpl's message_id/3 (v4.0.5 789-803).
func messageIDMC(v amqp10.Value, hkey string, h rfmt.Table) (rfmt.Table, *string) {
	switch v.Type {
	case amqp10.UUID:
		return h, str("urn:uuid:" + amqp10.UUIDString(v.Bytes))
	case amqp10.Ulong:
		return h, str(strconv.FormatUint(v.Num, 10))
	case amqp10.Binary:
		return append(rfmt.Table{{Name: hkey, Value: rfmt.FieldValue{Type: 'x', V: v.Bytes}}}, h...), nil
	case amqp10.String:
		if len(v.Bytes) <= 255 {
			return h, str(string(v.Bytes))
		}
		return append(rfmt.Table{{Name: hkey, Value: rfmt.FieldValue{Type: 'S', V: v.Bytes}}}, h...), nil
	}
	return h, nil
}

// fieldMC is mc_amqpl:to_091/2 (v4.0.5 737-760).
func fieldMC(v amqp10.Value) (rfmt.FieldValue, bool) {
	switch v.Type {
	case amqp10.String, amqp10.Symbol, amqp10.Binary:
		return rfmt.FieldValue{Type: 'S', V: v.Bytes}, true
	case amqp10.Long, amqp10.Ulong:
		return rfmt.FieldValue{Type: 'l', V: int64(v.Num)}, true
	case amqp10.Byte:
		return rfmt.FieldValue{Type: 'b', V: v.Int()}, true
	case amqp10.Ubyte:
		return rfmt.FieldValue{Type: 'B', V: int64(v.Num)}, true
	case amqp10.Short:
		return rfmt.FieldValue{Type: 's', V: v.Int()}, true
	case amqp10.Ushort:
		return rfmt.FieldValue{Type: 'u', V: int64(v.Num)}, true
	case amqp10.Uint:
		return rfmt.FieldValue{Type: 'i', V: int64(v.Num)}, true
	case amqp10.Int:
		return rfmt.FieldValue{Type: 'I', V: v.Int()}, true
	case amqp10.Double, amqp10.Float:
		t := byte('d')
		if v.Type == amqp10.Float {
			t = 'f'
		}
		return rfmt.FieldValue{Type: t, V: v.Float()}, true
	case amqp10.Timestamp:
		return rfmt.FieldValue{Type: 'T', V: uint64(v.Int() / 1000)}, true
	case amqp10.Boolean:
		return rfmt.FieldValue{Type: 't', V: v.Bool()}, true
	case amqp10.Null:
		return rfmt.FieldValue{Type: 'V'}, true
	case amqp10.List, amqp10.Array:
		var a []rfmt.FieldValue
		for _, it := range v.Items {
			if fv, ok := fieldMC(it); ok {
				a = append(a, fv)
			}
		}
		return rfmt.FieldValue{Type: 'A', V: a}, true
	case amqp10.Map:
		t := rfmt.Table{}
		for _, kv := range v.Pairs() {
			if fv, ok := fieldMC(kv[1]); ok {
				t = append(t, rfmt.Field{Name: kv[0].Str(), Value: fv})
			}
		}
		return rfmt.FieldValue{Type: 'F', V: t}, true
	}
	return rfmt.FieldValue{}, false
}

// to091MsgRecord is rabbit_msg_record:to_amqp091/1 (RabbitMQ < 3.13).
func to091MsgRecord(d Decoded) Delivery091 {
	m := &d.Msg
	var p rfmt.BasicProperties
	ma := m.MessageAnnotations()
	ap := m.ApplicationProperties()
	if v, ok := mapGet(ma, amqp10.Symbol, "x-basic-priority"); ok && !v.IsNull() {
		p.Priority = u8ptr(v.Num)
	}
	if v, ok := mapGet(ma, amqp10.Symbol, "x-basic-delivery-mode"); ok && !v.IsNull() {
		p.DeliveryMode = u8ptr(v.Num)
	}
	if v, ok := mapGet(ma, amqp10.Symbol, "x-basic-expiration"); ok {
		p.Expiration = unwrapStr(v)
	}
	var headers rfmt.Table
	for _, kv := range ap.Pairs() {
		k := kv[0]
		if k.Type == amqp10.String && (string(k.Bytes) == "x-basic-type" || string(k.Bytes) == "x-basic-app-id") {
			if string(k.Bytes) == "x-basic-type" {
				p.Type = unwrapStr(kv[1])
			} else {
				p.AppID = unwrapStr(kv[1])
			}
			continue
		}
		if fv, ok := fieldMsgRecord(kv[1]); ok {
			headers = append(headers, rfmt.Field{Name: string(k.Bytes), Value: fv})
		}
	}
	pr := m.Properties()
	var mid, cid *string
	headers, mid = messageIDMsgRecord(pr.MessageID, "x-message-id-type", headers)
	headers, cid = messageIDMsgRecord(pr.CorrelationID, "x-correlation-id-type", headers)
	if len(headers) > 0 {
		p.Headers = headers
	}
	p.MessageID, p.CorrelationID = mid, cid
	p.UserID = unwrapStr(pr.UserID)
	p.ReplyTo = unwrapStr(pr.ReplyTo)
	p.ContentType = unwrapStr(pr.ContentType)
	p.ContentEncoding = unwrapStr(pr.ContentEncoding)
	if pr.CreationTime.Type == amqp10.Timestamp {
		ts := uint64(pr.CreationTime.Int() / 1000)
		p.Timestamp = &ts
	}
	return Delivery091{Properties: p, Body: d.Body}
}

// messageIDMsgRecord is rabbit_msg_record:message_id/3 (v3.10.8 349-376).
func messageIDMsgRecord(v amqp10.Value, hkey string, h rfmt.Table) (rfmt.Table, *string) {
	long := hkey[:len(hkey)-len("-type")]
	switch v.Type {
	case amqp10.UUID:
		return append(rfmt.Table{{Name: hkey, Value: rfmt.FieldValue{Type: 'S', V: []byte("uuid")}}}, h...), str(amqp10.UUIDString(v.Bytes))
	case amqp10.Ulong:
		return append(rfmt.Table{{Name: hkey, Value: rfmt.FieldValue{Type: 'S', V: []byte("ulong")}}}, h...), str(strconv.FormatUint(v.Num, 10))
	case amqp10.Binary:
		e := base64Std(v.Bytes)
		if len(e) > 256 {
			return append(rfmt.Table{{Name: long, Value: rfmt.FieldValue{Type: 'S', V: v.Bytes}}}, h...), nil
		}
		return append(rfmt.Table{{Name: hkey, Value: rfmt.FieldValue{Type: 'S', V: []byte("binary")}}}, h...), str(e)
	case amqp10.String:
		if len(v.Bytes) > 256 {
			return append(rfmt.Table{{Name: long, Value: rfmt.FieldValue{Type: 'S', V: v.Bytes}}}, h...), nil
		}
		return h, str(string(v.Bytes))
	case amqp10.Null:
		return h, nil
	}
	return h, unwrapStr(v)
}

// fieldMsgRecord is rabbit_msg_record:to_091/2 (v3.10.8 331-347).
func fieldMsgRecord(v amqp10.Value) (rfmt.FieldValue, bool) {
	switch v.Type {
	case amqp10.String:
		return rfmt.FieldValue{Type: 'S', V: v.Bytes}, true
	case amqp10.Binary:
		return rfmt.FieldValue{Type: 'x', V: v.Bytes}, true
	case amqp10.Timestamp:
		return rfmt.FieldValue{Type: 'T', V: uint64(v.Int() / 1000)}, true
	case amqp10.Symbol, amqp10.Ulong, amqp10.Char, amqp10.UUID, amqp10.List, amqp10.Map, amqp10.Array, amqp10.Described,
		amqp10.Decimal32, amqp10.Decimal64, amqp10.Decimal128:
		return rfmt.FieldValue{}, false // to_091/2 has no clause: the broker fails on such a header
	}
	return fieldMC(v)
}

func base64Std(b []byte) string { return base64.StdEncoding.EncodeToString(b) }
