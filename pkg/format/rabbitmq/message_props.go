package rabbitmq

// AMQP 0-9-1 basic content-header property list (properties_bin), as
// parsed by rabbit_binary_parser: a 16-bit flags word (bit 15 =
// content_type ... bit 2 = cluster_id, bit 0 = continuation), then the
// present fields in flag order. shortstr = Len:8 + bytes; longstr and
// tables = Len:32 + bytes; integers big-endian.

import (
	"math"

	"github.com/storectl/storectl/pkg/format"
)

// BasicProperties are the 14 basic-class properties; nil means absent.
type BasicProperties struct {
	Flags           uint16
	ContentType     *string
	ContentEncoding *string
	Headers         Table // nil when absent; empty (non-nil) when present and empty
	DeliveryMode    *uint8
	Priority        *uint8
	CorrelationID   *string
	ReplyTo         *string
	Expiration      *string
	MessageID       *string
	Timestamp       *uint64 // seconds, as on the wire
	Type            *string
	UserID          *string
	AppID           *string
	ClusterID       *string
}

// Table is an AMQP field table in wire order.
type Table []Field

// Field is one table entry.
type Field struct {
	Name  string
	Value FieldValue
}

// FieldValue is a typed table or array value. Type is the wire type byte;
// V is []byte (S, x), int64 (I, i, l, s, u, b, B), bool (t), float64
// (d, f), Decimal (D), uint64 (T), nil (V), []FieldValue (A) or Table (F).
type FieldValue struct {
	Type byte
	V    any
}

// Decimal is a 'D' value: Unscaled / 10^Scale.
type Decimal struct {
	Scale    uint8
	Unscaled uint32
}

// FieldTypeName names a field type byte as rabbit_binary_parser does
// (longstr, signedint, ...); "" for unknown types.
func FieldTypeName(t byte) string {
	return propsTypeNames[t]
}

var propsTypeNames = map[byte]string{
	'S': "longstr", 'I': "signedint", 'i': "unsignedint", 'l': "long", 's': "short",
	'u': "unsignedshort", 'b': "byte", 'B': "unsignedbyte", 't': "bool", 'd': "double",
	'f': "float", 'D': "decimal", 'T': "timestamp", 'V': "void", 'x': "binary",
	'A': "array", 'F': "table",
}

// MaxTableDepth bounds nesting of header tables and arrays. AMQP sets no
// limit; real headers (x-death) nest 3 levels, and 64 keeps the recursive
// parser on a small stack.
const MaxTableDepth = 64

// DecodeBasicProperties decodes properties_bin. off is the file offset of
// b[0], for error offsets.
func DecodeBasicProperties(b []byte, off int64) (BasicProperties, error) {
	c := format.Cursor{B: b}
	var p BasicProperties
	p.Flags = c.U16("flags")
	if c.Failed() {
		return p, c.Err(off)
	}
	if p.Flags&1 != 0 {
		// The basic class has 14 properties, so one flags word is enough;
		// RabbitMQ never writes a continuation word for it.
		c.FailAt(0, "flags", format.ErrUnsupported)
		return p, c.Err(off)
	}
	if p.Flags&2 != 0 {
		c.FailAt(0, "flags", format.ErrInvalid) // bit 1 is not a basic property
		return p, c.Err(off)
	}
	has := func(bit uint) bool { return p.Flags&(1<<bit) != 0 }
	short := func(bit uint, name string) *string {
		if !has(bit) {
			return nil
		}
		s := string(c.Take(name, int(c.U8(name))))
		return &s
	}
	octet := func(bit uint, name string) *uint8 {
		if !has(bit) {
			return nil
		}
		v := c.U8(name)
		return &v
	}
	p.ContentType = short(15, "content_type")
	p.ContentEncoding = short(14, "content_encoding")
	if has(13) {
		p.Headers = propsTable(&c, c.Take("headers", int(c.U32("headers"))), 0)
		if p.Headers == nil && !c.Failed() {
			p.Headers = Table{}
		}
	}
	p.DeliveryMode = octet(12, "delivery_mode")
	p.Priority = octet(11, "priority")
	p.CorrelationID = short(10, "correlation_id")
	p.ReplyTo = short(9, "reply_to")
	p.Expiration = short(8, "expiration")
	p.MessageID = short(7, "message_id")
	if has(6) {
		v := c.U64("timestamp")
		p.Timestamp = &v
	}
	p.Type = short(5, "type")
	p.UserID = short(4, "user_id")
	p.AppID = short(3, "app_id")
	p.ClusterID = short(2, "cluster_id")
	if !c.Failed() && c.Remaining() != 0 {
		c.Fail("properties_bin", format.ErrInvalid) // trailing bytes
	}
	return p, c.Err(off)
}

// propsTable parses a table body (already cut to its length) whose first
// byte sits at parent.Off-len(body) in parent; errors are reported through
// parent with the absolute position.
func propsTable(parent *format.Cursor, body []byte, depth int) Table {
	if parent.Failed() {
		return nil
	}
	start := parent.Off - len(body)
	c := format.Cursor{B: body}
	var t Table
	for c.Remaining() > 0 && !c.Failed() {
		name := string(c.Take("header name", int(c.U8("header name"))))
		v := propsValue(&c, depth)
		t = append(t, Field{Name: name, Value: v})
	}
	propsPropagate(parent, &c, start)
	return t
}

// propsArray parses an array body: a sequence of typed values.
func propsArray(c *format.Cursor, body []byte, depth int) []FieldValue {
	start := c.Off - len(body)
	a := format.Cursor{B: body}
	out := []FieldValue{}
	for a.Remaining() > 0 && !a.Failed() {
		out = append(out, propsValue(&a, depth))
	}
	propsPropagate(c, &a, start)
	return out
}

// propsPropagate copies a nested cursor's failure into its parent.
func propsPropagate(parent, child *format.Cursor, start int) {
	if err := child.Err(int64(start)); err != nil {
		ce := err.(*format.CorruptError)
		parent.FailAt(int(ce.Offset), ce.Field, ce.Err)
	}
}

// propsValue reads one type byte and its value.
func propsValue(c *format.Cursor, depth int) FieldValue {
	at := c.Off
	typ := c.U8("header type")
	v := FieldValue{Type: typ}
	switch typ {
	case 'S', 'x':
		v.V = c.Take("longstr", int(c.U32("longstr")))
	case 'I':
		v.V = int64(int32(c.U32("signedint")))
	case 'i':
		v.V = int64(c.U32("unsignedint"))
	case 'l':
		v.V = int64(c.U64("long"))
	case 's':
		v.V = int64(int16(c.U16("short")))
	case 'u':
		v.V = int64(c.U16("unsignedshort"))
	case 'b':
		v.V = int64(int8(c.U8("byte")))
	case 'B':
		v.V = int64(c.U8("unsignedbyte"))
	case 't':
		v.V = c.U8("bool") != 0
	case 'd':
		v.V = math.Float64frombits(c.U64("double"))
	case 'f':
		v.V = float64(math.Float32frombits(c.U32("float")))
	case 'D':
		v.V = Decimal{Scale: c.U8("decimal"), Unscaled: c.U32("decimal")}
	case 'T':
		v.V = c.U64("timestamp")
	case 'V':
	case 'A', 'F':
		if depth >= MaxTableDepth {
			c.FailAt(at, "header depth", format.ErrTooLarge)
			return v
		}
		body := c.Take("table", int(c.U32("table")))
		if typ == 'A' {
			v.V = propsArray(c, body, depth+1)
		} else {
			t := propsTable(c, body, depth+1)
			if t == nil {
				t = Table{}
			}
			v.V = t
		}
	default:
		if !c.Failed() {
			c.FailAt(at, "header type", format.ErrInvalid)
		}
	}
	return v
}
