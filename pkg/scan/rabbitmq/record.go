package rabbitmq

import (
	"encoding/hex"

	rfmt "github.com/storectl/storectl/pkg/format/rabbitmq"
)

// RecordJSON is what Options.Records receives for each real record
// (docs/cli.md `record`, RabbitMQ fields).
type RecordJSON struct {
	Path          string   `json:"path"`
	Offset        int64    `json:"offset"`
	Size          int64    `json:"size"` // TotalSize: the whole frame
	MsgID         string   `json:"msg_id"`
	ReferencedBy  []string `json:"referenced_by"`
	Exchange      string   `json:"exchange"`
	RoutingKeys   []string `json:"routing_keys"`
	PayloadSize   int64    `json:"payload_size"` // -1 when the term holds no AMQP 0-9-1 payload
	PayloadSHA256 string   `json:"payload_sha256,omitempty"`
	MessageID     string   `json:"message_id"` // AMQP message-id; "" when absent
	Term          string   `json:"term"`       // basic_message | mc | ""
	Status        string   `json:"status"`     // referenced | unreferenced | duplicate | unknown
	IndexMatch    string   `json:"index_match,omitempty"`
	// LostBy names the scanner hazards that lose the record: the whole
	// of their victim lists, which their findings only sum up.
	LostBy []LostBy `json:"lost_by,omitempty"`
}

// LostBy is a scanner hazard that loses a record: its finding's code and
// offset (in the record's file) and the RabbitMQ versions it bites.
type LostBy struct {
	Code     string `json:"code"`
	Offset   int64  `json:"offset"`
	Versions string `json:"versions"`
}

// newRecordJSON decodes the record's body from the file bytes b.
func newRecordJSON(b []byte, r *Record) RecordJSON {
	j := RecordJSON{Path: r.Path, Offset: r.Offset, Size: r.TotalSize, MsgID: r.ID(),
		ReferencedBy: r.ReferencedBy, RoutingKeys: []string{}, PayloadSize: -1, Term: r.Term,
		Status: r.Status, IndexMatch: r.IndexMatch}
	if j.ReferencedBy == nil {
		j.ReferencedBy = []string{}
	}
	body := b[r.Offset+rfmt.RDQHeaderLen : r.End()-1]
	m, err := rfmt.DecodeMessage(body, r.Offset+rfmt.RDQHeaderLen)
	if err != nil {
		return j
	}
	j.Exchange = m.Exchange
	if m.RoutingKeys != nil {
		j.RoutingKeys = m.RoutingKeys
	}
	if m.Content != nil {
		j.PayloadSize = m.PayloadSize
		j.PayloadSHA256 = hex.EncodeToString(m.PayloadSHA256[:])
	}
	if m.Properties != nil && m.Properties.MessageID != nil {
		j.MessageID = *m.Properties.MessageID
	}
	return j
}
