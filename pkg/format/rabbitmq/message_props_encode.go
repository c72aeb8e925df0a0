package rabbitmq

import (
	"encoding/binary"
	"fmt"
	"math"
)

// AppendBasicProperties appends the properties_bin encoding of p (the
// inverse of DecodeBasicProperties): the flags word made from the present
// properties (p.Flags is ignored), then each present one in flag order.
// It fails for a short string over 255 bytes, a table or array over 4 GiB,
// or a field value whose Go type does not match its type byte.
func AppendBasicProperties(dst []byte, p BasicProperties) ([]byte, error) {
	var flags uint16
	set := func(bit uint, present bool) {
		if present {
			flags |= 1 << bit
		}
	}
	set(15, p.ContentType != nil)
	set(14, p.ContentEncoding != nil)
	set(13, p.Headers != nil)
	set(12, p.DeliveryMode != nil)
	set(11, p.Priority != nil)
	set(10, p.CorrelationID != nil)
	set(9, p.ReplyTo != nil)
	set(8, p.Expiration != nil)
	set(7, p.MessageID != nil)
	set(6, p.Timestamp != nil)
	set(5, p.Type != nil)
	set(4, p.UserID != nil)
	set(3, p.AppID != nil)
	set(2, p.ClusterID != nil)
	dst = binary.BigEndian.AppendUint16(dst, flags)
	var err error
	short := func(name string, s *string) {
		if s == nil || err != nil {
			return
		}
		if len(*s) > 255 {
			err = fmt.Errorf("%s: %d bytes do not fit a short string", name, len(*s))
			return
		}
		dst = append(append(dst, byte(len(*s))), *s...)
	}
	short("content_type", p.ContentType)
	short("content_encoding", p.ContentEncoding)
	if p.Headers != nil && err == nil {
		dst, err = appendTable(dst, p.Headers, 0)
	}
	if p.DeliveryMode != nil {
		dst = append(dst, *p.DeliveryMode)
	}
	if p.Priority != nil {
		dst = append(dst, *p.Priority)
	}
	short("correlation_id", p.CorrelationID)
	short("reply_to", p.ReplyTo)
	short("expiration", p.Expiration)
	short("message_id", p.MessageID)
	if p.Timestamp != nil {
		dst = binary.BigEndian.AppendUint64(dst, *p.Timestamp)
	}
	short("type", p.Type)
	short("user_id", p.UserID)
	short("app_id", p.AppID)
	short("cluster_id", p.ClusterID)
	return dst, err
}

// appendTable appends a field table with its 32-bit length.
func appendTable(dst []byte, t Table, depth int) ([]byte, error) {
	if depth >= MaxTableDepth {
		return dst, fmt.Errorf("headers nest deeper than %d", MaxTableDepth)
	}
	at := len(dst)
	dst = append(dst, 0, 0, 0, 0)
	for _, f := range t {
		if len(f.Name) > 255 {
			return dst, fmt.Errorf("header name of %d bytes", len(f.Name))
		}
		dst = append(append(dst, byte(len(f.Name))), f.Name...)
		var err error
		if dst, err = appendFieldValue(dst, f.Value, depth); err != nil {
			return dst, fmt.Errorf("header %q: %w", f.Name, err)
		}
	}
	return putLen(dst, at)
}

func putLen(dst []byte, at int) ([]byte, error) {
	n := len(dst) - at - 4
	if int64(n) > math.MaxUint32 {
		return dst, fmt.Errorf("%d bytes do not fit a 32-bit length", n)
	}
	binary.BigEndian.PutUint32(dst[at:], uint32(n))
	return dst, nil
}

// appendFieldValue appends a type byte and its value (the V types
// DecodeBasicProperties produces).
func appendFieldValue(dst []byte, v FieldValue, depth int) ([]byte, error) {
	dst = append(dst, v.Type)
	bad := fmt.Errorf("value %T for type %q", v.V, v.Type)
	i64 := func() (int64, bool) { n, ok := v.V.(int64); return n, ok }
	be := binary.BigEndian
	switch v.Type {
	case 'S', 'x':
		b, ok := v.V.([]byte)
		if !ok || int64(len(b)) > math.MaxUint32 {
			return dst, bad
		}
		return append(be.AppendUint32(dst, uint32(len(b))), b...), nil
	case 'I', 'i':
		n, ok := i64()
		if !ok {
			return dst, bad
		}
		return be.AppendUint32(dst, uint32(n)), nil
	case 'l':
		n, ok := i64()
		if !ok {
			return dst, bad
		}
		return be.AppendUint64(dst, uint64(n)), nil
	case 's', 'u':
		n, ok := i64()
		if !ok {
			return dst, bad
		}
		return be.AppendUint16(dst, uint16(n)), nil
	case 'b', 'B':
		n, ok := i64()
		if !ok {
			return dst, bad
		}
		return append(dst, byte(n)), nil
	case 't':
		b, ok := v.V.(bool)
		if !ok {
			return dst, bad
		}
		if b {
			return append(dst, 1), nil
		}
		return append(dst, 0), nil
	case 'd':
		f, ok := v.V.(float64)
		if !ok {
			return dst, bad
		}
		return be.AppendUint64(dst, math.Float64bits(f)), nil
	case 'f':
		f, ok := v.V.(float64)
		if !ok {
			return dst, bad
		}
		return be.AppendUint32(dst, math.Float32bits(float32(f))), nil
	case 'D':
		d, ok := v.V.(Decimal)
		if !ok {
			return dst, bad
		}
		return be.AppendUint32(append(dst, d.Scale), d.Unscaled), nil
	case 'T':
		n, ok := v.V.(uint64)
		if !ok {
			return dst, bad
		}
		return be.AppendUint64(dst, n), nil
	case 'V':
		return dst, nil
	case 'A':
		a, ok := v.V.([]FieldValue)
		if !ok && v.V != nil {
			return dst, bad
		}
		if depth+1 >= MaxTableDepth {
			return dst, fmt.Errorf("headers nest deeper than %d", MaxTableDepth)
		}
		at := len(dst)
		dst = append(dst, 0, 0, 0, 0)
		for _, e := range a {
			var err error
			if dst, err = appendFieldValue(dst, e, depth+1); err != nil {
				return dst, err
			}
		}
		return putLen(dst, at)
	case 'F':
		t, ok := v.V.(Table)
		if !ok && v.V != nil {
			return dst, bad
		}
		return appendTable(dst, t, depth+1)
	}
	return dst, fmt.Errorf("unknown field type %q", v.Type)
}
