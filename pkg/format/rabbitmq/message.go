package rabbitmq

// Message extraction from an .rdq body term (§2.1):
//
//	≤3.12 (and 3.13 with message_containers off):
//	  {basic_message, {resource, VHost, exchange, Name}, [RoutingKey], Content, Id, IsPersistent}
//	3.13 / 4.x:
//	  {mc, Protocol, Data, Annotations}  Protocol = mc_amqpl (Data = Content) | mc_amqp (AMQP 1.0) | ...
//	Content = {content, ClassId, none, PropertiesBin, rabbit_framing_amqp_0_9_1, PayloadFragmentsRev}
//	payload = concat(reverse(PayloadFragmentsRev))
//
// Annotations of mc (mc.hrl): x exchange, rk routing keys, id store msg id,
// d => false for non-durable, p priority, ts timestamp, ttl, deaths, ...

import (
	"crypto/sha256"

	"github.com/storectl/storectl/pkg/format"
	"github.com/storectl/storectl/pkg/format/etf"
)

// Record kinds of a message body term.
const (
	RecordBasicMessage = "basic_message"
	RecordMC           = "mc"
)

// Message is what a body term says about one message. Byte slices alias
// the body passed to DecodeMessage, except Payload when it had to be
// joined from several fragments.
type Message struct {
	Record        string           // RecordBasicMessage or RecordMC
	Protocol      string           // mc protocol module (mc_amqpl, mc_amqp, ...); empty for basic_message
	Exchange      string           // exchange name; "" is the default exchange
	RoutingKeys   []string         // routing keys (mc: the rk annotation, incl. CC/BCC)
	ID            []byte           // #basic_message.id or the mc id annotation; nil if absent
	Durable       bool             // is_persistent, or mc: no "d => false" annotation
	Annotations   etf.Map          // mc annotations as stored; nil for basic_message
	Content       *Content         // AMQP 0-9-1 content; nil for other protocols
	Properties    *BasicProperties // decoded Content.PropertiesBin; nil without Content
	Payload       []byte           // the message body bytes; nil without Content
	PayloadSize   int64            // len(Payload)
	PayloadSHA256 [32]byte         // sha256 of Payload
}

// Content is a #content{} record as stored (properties are always 'none'
// on disk; PropertiesBin holds the encoded property list).
type Content struct {
	ClassID       int64
	PropertiesBin []byte
	Protocol      string   // framing module, rabbit_framing_amqp_0_9_1
	FragmentsRev  [][]byte // payload_fragments_rev, in stored (reversed) order
}

// DecodeMessage decodes body (the ETF term of an .rdq record, exactly one
// term) and extracts the message. off is the file offset of body[0], used
// for error offsets.
func DecodeMessage(body []byte, off int64) (Message, error) {
	t, n, err := etf.DecodeAt(body, off)
	if err != nil {
		return Message{}, err
	}
	if n != len(body) {
		return Message{}, format.Corrupt(off+int64(n), "body", format.ErrInvalid)
	}
	m, field, perr := messageFromTerm(t)
	if field != "" {
		return m, format.Corrupt(off, field, format.ErrInvalid)
	}
	if perr != nil {
		// Offset inside properties_bin; locate that slice inside body.
		perr.Offset += off + int64(messageSliceOffset(body, m.Content.PropertiesBin))
		return m, perr
	}
	return m, nil
}

// MessageFromTerm extracts the message from an already decoded body term.
// Errors are *format.CorruptError with Offset 0 (for properties errors: the
// offset inside PropertiesBin).
func MessageFromTerm(t etf.Term) (Message, error) {
	m, field, perr := messageFromTerm(t)
	if field != "" {
		return m, format.Corrupt(0, field, format.ErrInvalid)
	}
	if perr != nil {
		return m, perr
	}
	return m, nil
}

// messageFromTerm returns the failing field name, or a properties error.
func messageFromTerm(t etf.Term) (m Message, field string, perr *format.CorruptError) {
	tup, ok := t.(etf.Tuple)
	if !ok || len(tup) == 0 {
		return m, "record", nil
	}
	var content etf.Term
	switch tup[0] {
	case etf.Atom(RecordBasicMessage):
		if len(tup) != 6 {
			return m, "basic_message", nil
		}
		m.Record = RecordBasicMessage
		if m.Exchange, ok = messageResourceName(tup[1]); !ok {
			return m, "exchange_name", nil
		}
		if m.RoutingKeys, ok = messageStrings(tup[2]); !ok {
			return m, "routing_keys", nil
		}
		content = tup[3]
		if id, isBin := tup[4].(etf.Binary); isBin {
			m.ID = id
		}
		m.Durable = tup[5] == etf.Atom("true")
	case etf.Atom(RecordMC):
		if len(tup) != 4 {
			return m, "mc", nil
		}
		m.Record = RecordMC
		proto, isAtom := tup[1].(etf.Atom)
		anns, isMap := tup[3].(etf.Map)
		if !isAtom || !isMap {
			return m, "mc", nil
		}
		m.Protocol, m.Annotations = string(proto), anns
		if field := m.fromAnnotations(); field != "" {
			return m, field, nil
		}
		if m.Protocol != "mc_amqpl" {
			return m, "", nil // AMQP 1.0 and other protocols: recognised, payload not decoded
		}
		content = tup[2]
	default:
		return m, "record", nil
	}
	c, field := messageContent(content)
	if field != "" {
		return m, field, nil
	}
	m.Content = c
	props, err := DecodeBasicProperties(c.PropertiesBin, 0)
	if err != nil {
		ce := err.(*format.CorruptError)
		return m, "", ce
	}
	m.Properties = &props
	m.Payload = messageJoinRev(c.FragmentsRev)
	m.PayloadSize = int64(len(m.Payload))
	m.PayloadSHA256 = sha256.Sum256(m.Payload)
	return m, "", nil
}

// fromAnnotations fills exchange, routing keys, id and durability from the
// mc annotation map.
func (m *Message) fromAnnotations() string {
	m.Durable = true
	for _, e := range m.Annotations {
		switch e.Key {
		case etf.Atom("x"):
			b, ok := e.Value.(etf.Binary)
			if !ok {
				return "annotations.x"
			}
			m.Exchange = string(b)
		case etf.Atom("rk"):
			rk, ok := messageStrings(e.Value)
			if !ok {
				return "annotations.rk"
			}
			m.RoutingKeys = rk
		case etf.Atom("id"):
			if b, ok := e.Value.(etf.Binary); ok {
				m.ID = b
			}
		case etf.Atom("d"):
			m.Durable = e.Value != etf.Atom("false")
		}
	}
	return ""
}

// messageContent reads a #content{} record.
func messageContent(t etf.Term) (*Content, string) {
	tup, ok := t.(etf.Tuple)
	if !ok || len(tup) != 6 || tup[0] != etf.Atom("content") {
		return nil, "content"
	}
	c := &Content{}
	if c.ClassID, ok = tup[1].(int64); !ok {
		return nil, "content.class_id"
	}
	if pb, ok := tup[3].(etf.Binary); ok {
		c.PropertiesBin = pb
	} else {
		return nil, "content.properties_bin"
	}
	if p, ok := tup[4].(etf.Atom); ok {
		c.Protocol = string(p)
	}
	frags, ok := etf.ProperList(tup[5])
	if !ok {
		return nil, "content.payload_fragments_rev"
	}
	for _, f := range frags {
		b, ok := f.(etf.Binary)
		if !ok {
			return nil, "content.payload_fragments_rev"
		}
		c.FragmentsRev = append(c.FragmentsRev, b)
	}
	return c, ""
}

// messageStrings reads a proper list of binaries.
func messageStrings(t etf.Term) ([]string, bool) {
	elems, ok := etf.ProperList(t)
	if !ok {
		return nil, false
	}
	out := make([]string, 0, len(elems))
	for _, e := range elems {
		b, ok := e.(etf.Binary)
		if !ok {
			return nil, false
		}
		out = append(out, string(b))
	}
	return out, true
}

// messageResourceName reads #resource{virtual_host, kind, name}.
func messageResourceName(t etf.Term) (string, bool) {
	tup, ok := t.(etf.Tuple)
	if !ok || len(tup) != 4 || tup[0] != etf.Atom("resource") {
		return "", false
	}
	b, ok := tup[3].(etf.Binary)
	return string(b), ok
}

// messageJoinRev concatenates reversed fragments; a single fragment is
// returned as is. The total is bounded by the body size.
func messageJoinRev(rev [][]byte) []byte {
	switch len(rev) {
	case 0:
		return []byte{}
	case 1:
		return rev[0]
	}
	n := 0
	for _, f := range rev {
		n += len(f)
	}
	out := make([]byte, 0, n)
	for i := len(rev) - 1; i >= 0; i-- {
		out = append(out, rev[i]...)
	}
	return out
}

// messageSliceOffset finds where sub (a slice aliasing body) starts inside
// body; 0 if it does not alias it. Used on error paths only.
func messageSliceOffset(body, sub []byte) int {
	if len(sub) == 0 {
		return 0
	}
	for i := range body {
		if &body[i] == &sub[0] {
			return i
		}
	}
	return 0
}
