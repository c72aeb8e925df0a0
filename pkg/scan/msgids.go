package scan

import "encoding/hex"

// MsgIDs is a list of 16-byte message ids (RabbitMQ msg store ids). It is
// kept as bytes, not strings (a queue can name hundreds of thousands), and
// encodes as a JSON array of 32-hex-digit strings.
type MsgIDs [][16]byte

// Strings returns the ids in hex.
func (m MsgIDs) Strings() []string {
	out := make([]string, len(m))
	for i, id := range m {
		out[i] = hex.EncodeToString(id[:])
	}
	return out
}

// AppendJSON appends m as a JSON array of hex strings (null when nil, as
// encoding/json encodes a nil slice).
func (m MsgIDs) AppendJSON(b []byte) ([]byte, error) {
	if m == nil {
		return append(b, "null"...), nil
	}
	b = append(b, '[')
	for i, id := range m {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '"')
		b = hex.AppendEncode(b, id[:])
		b = append(b, '"')
	}
	return append(b, ']'), nil
}

// MarshalJSON encodes m as AppendJSON does.
func (m MsgIDs) MarshalJSON() ([]byte, error) {
	return m.AppendJSON(make([]byte, 0, 2+len(m)*35))
}
