package rabbitmq

import (
	"encoding/hex"
	"strconv"
)

// InlineVictims is how many victims a hazard finding lists inline
// (details.victims): the rest are counted, the last named, and every
// victim's record line says which hazard loses it (--records, lost_by).
const InlineVictims = 3

// MsgID returns the victim's msg id in hex.
func (v Victim) MsgID() string { return hexID(v.ID) }

// AppendJSON appends v as a JSON object with the field names of the
// finding schema. Status is one of the Status* constants (plain ASCII).
func (v Victim) AppendJSON(b []byte) ([]byte, error) {
	b = append(b, `{"msg_id":"`...)
	b = hex.AppendEncode(b, v.ID[:])
	b = append(b, `","offset":`...)
	b = strconv.AppendInt(b, v.Offset, 10)
	b = append(b, `,"size":`...)
	b = strconv.AppendInt(b, v.Size, 10)
	b = append(b, `,"status":`...)
	b = strconv.AppendQuote(b, v.Status)
	return append(b, '}'), nil
}

// MarshalJSON encodes v as {"msg_id", "offset", "size", "status"}.
func (v Victim) MarshalJSON() ([]byte, error) { return v.AppendJSON(nil) }

// MarshalJSON encodes the list as a JSON array of victims (null when nil,
// as encoding/json does for a nil slice).
func (vs Victims) MarshalJSON() ([]byte, error) {
	return vs.AppendJSON(make([]byte, 0, 2+len(vs)*96))
}

// AppendJSON appends what MarshalJSON returns (report.JSONAppender: the
// JSONL emitter writes it without encoding/json's re-scan).
func (vs Victims) AppendJSON(b []byte) ([]byte, error) {
	if vs == nil {
		return append(b, "null"...), nil
	}
	b = append(b, '[')
	for i, v := range vs {
		if i > 0 {
			b = append(b, ',')
		}
		b, _ = v.AppendJSON(b)
	}
	return append(b, ']'), nil
}
