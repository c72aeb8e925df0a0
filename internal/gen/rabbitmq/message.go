// Package rabbitmq writes RabbitMQ classic-queue store files for tests and
// benchmarks: .rdq records holding real-looking #basic_message{} (3.x) or
// #mc{} (4.x) terms, queue index v2 (.qi) files referencing them, zero
// holes, and the byte surgery the misread corpus needs (resizing a real
// record, setting its msg id). Everything is deterministic for a seed.
// The formats: docs/formats/rabbitmq-classic.md (section numbers in
// comments refer to it).
// Terms are encoded by pkg/format/rabbitmq's EncodeTerm.
//
// Nothing in it is used by the scanner.
package rabbitmq

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/storectl/storectl/pkg/format/etf"
)

// TermKind selects the body term of a record.
type TermKind int

// Body terms: #basic_message{} (≤3.12, 3.13 without message containers)
// and {mc, mc_amqpl, #content{}, Annotations} (3.13+, 4.x).
const (
	BasicMessage TermKind = iota
	MC
)

// Message is what Body encodes.
type Message struct {
	ID         [16]byte // store msg id (also the term's id field)
	Exchange   string
	RoutingKey string
	MessageID  string // AMQP message-id property; "" = absent
	Payload    []byte
	Timestamp  int64 // mc rts annotation, ms
}

// amqpProps encodes AMQP 0-9-1 basic properties as the broker stores them
// in #content.properties_bin: flags content-type, delivery-mode and,
// when set, message-id.
func amqpProps(messageID string) []byte {
	flags := uint16(1<<15 | 1<<12)
	if messageID != "" {
		flags |= 1 << 7
	}
	b := binary.BigEndian.AppendUint16(nil, flags)
	ct := "application/octet-stream"
	b = append(b, byte(len(ct)))
	b = append(b, ct...)
	b = append(b, 2) // delivery-mode persistent
	if messageID != "" {
		b = append(b, byte(len(messageID)))
		b = append(b, messageID...)
	}
	return b
}

// Body returns term_to_binary of the message in the given shape (OTP 26+
// atoms: SMALL_ATOM_UTF8_EXT), encoded by pkg/format/rabbitmq.
func Body(kind TermKind, m *Message) []byte {
	b, err := etf.EncodeTerm(BodyTerm(kind, m), etf.AtomsUTF8)
	if err != nil {
		// Only a bad atom or a term nested past MaxTermDepth fails, and
		// every atom and the depth above are fixed.
		panic("gen: encoding a message body: " + err.Error())
	}
	return b
}

// BodyTerm is the message term Body encodes (the quorum queue generator
// puts it inside a rabbit_fifo enqueue command).
func BodyTerm(kind TermKind, m *Message) etf.Term {
	content := etf.Tuple{etf.Atom("content"), int64(60), etf.Atom("none"), etf.Binary(amqpProps(m.MessageID)),
		etf.Atom("rabbit_framing_amqp_0_9_1"), etf.List{Elems: []etf.Term{etf.Binary(m.Payload)}}}
	routingKeys := etf.List{Elems: []etf.Term{etf.Binary(m.RoutingKey)}}
	var t etf.Term
	switch kind {
	case BasicMessage:
		t = etf.Tuple{etf.Atom("basic_message"),
			etf.Tuple{etf.Atom("resource"), etf.Binary("/"), etf.Atom("exchange"), etf.Binary(m.Exchange)},
			routingKeys, content, etf.Binary(m.ID[:]), etf.Atom("true")}
	default:
		t = etf.Tuple{etf.Atom("mc"), etf.Atom("mc_amqpl"), content, etf.Map{
			{Key: etf.Atom("id"), Value: etf.Binary(m.ID[:])},
			{Key: etf.Atom("x"), Value: etf.Binary(m.Exchange)},
			{Key: etf.Atom("rk"), Value: routingKeys},
			{Key: etf.Atom("rts"), Value: m.Timestamp},
		}}
	}
	return t
}

// Frame returns one .rdq record <<Size:64, Id:16/binary, Body, 255>>.
func Frame(id [16]byte, body []byte) []byte {
	b := make([]byte, 0, 25+len(body))
	b = binary.BigEndian.AppendUint64(b, uint64(16+len(body)))
	b = append(b, id[:]...)
	b = append(b, body...)
	return append(b, 0xFF)
}

// Record is Frame(m.ID, Body(kind, m)).
func Record(kind TermKind, m *Message) []byte { return Frame(m.ID, Body(kind, m)) }

// ErrNoPayload means a record's body holds no payload binary the
// surgery helpers can find.
var ErrNoPayload = errors.New("gen: no payload binary in record body")

// ETF tags the record surgery looks for (erts/doc/src/erl_ext_dist.xml).
const (
	tagNil    = 106 // NIL_EXT, the tail of the #content{} payload list
	tagBinary = 109 // BINARY_EXT
)

// payloadAt finds the payload binary of a record made by a broker or by
// Body: the last BINARY_EXT whose length field covers exactly the bytes
// before the #content{} list tail. It returns the offset of the 0x6D tag
// inside rec and the payload length. plen is the payload length the
// caller knows (from a decoder); it disambiguates.
func payloadAt(rec []byte, plen int) (int, error) {
	pat := []byte{tagBinary, 0, 0, 0, 0}
	binary.BigEndian.PutUint32(pat[1:], uint32(plen))
	at := -1
	for i := 24; ; {
		j := bytes.Index(rec[i:], pat)
		if j < 0 {
			break
		}
		k := i + j
		// the payload is followed by the list tail NIL_EXT
		if k+5+plen < len(rec) && rec[k+5+plen] == tagNil {
			at = k
		}
		i = k + 1
	}
	if at < 0 {
		return 0, ErrNoPayload
	}
	return at, nil
}

// Resize returns a copy of the record rec (one whole frame whose payload
// is plen bytes long) with the payload cut or grown so that the record's
// Size field becomes size. Grown bytes repeat fill. The frame's size
// field and the binary's length field are rewritten; nothing else moves.
func Resize(rec []byte, plen int, size uint64, fill byte) ([]byte, error) {
	if len(rec) < 25 {
		return nil, ErrNoPayload
	}
	at, err := payloadAt(rec, plen)
	if err != nil {
		return nil, err
	}
	old := binary.BigEndian.Uint64(rec)
	delta := int64(size) - int64(old)
	nplen := int64(plen) + delta
	if nplen < 0 {
		return nil, fmt.Errorf("gen: size %d needs a negative payload", size)
	}
	out := make([]byte, 0, len(rec)+int(max(delta, 0)))
	out = append(out, rec[:at+5]...)
	pay := rec[at+5 : at+5+plen]
	if int(nplen) <= plen {
		out = append(out, pay[:nplen]...)
	} else {
		out = append(out, pay...)
		for range int(nplen) - plen {
			out = append(out, fill)
		}
	}
	out = append(out, rec[at+5+plen:]...)
	binary.BigEndian.PutUint64(out, size)
	binary.BigEndian.PutUint32(out[at+1:], uint32(nplen))
	return out, nil
}

// SetID rewrites a record's msg id in place: in the frame header and in
// the term's own id field (#basic_message.id or the mc id annotation,
// found as a 16-byte binary equal to the old id). It returns the old id.
func SetID(rec []byte, id [16]byte) [16]byte {
	var old [16]byte
	copy(old[:], rec[8:24])
	copy(rec[8:24], id[:])
	pat := append([]byte{tagBinary, 0, 0, 0, 16}, old[:]...)
	if i := bytes.Index(rec[24:], pat); i >= 0 {
		copy(rec[24+i+5:], id[:])
	}
	return old
}

// FillPayload sets every payload byte of a record (payload plen bytes
// long) to fill, in place.
func FillPayload(rec []byte, plen int, fill byte) error {
	at, err := payloadAt(rec, plen)
	if err != nil {
		return err
	}
	for i := range plen {
		rec[at+5+i] = fill
	}
	return nil
}

// PayloadOffset returns the offset inside rec of the first payload byte
// of a record whose payload is plen bytes long.
func PayloadOffset(rec []byte, plen int) (int, error) {
	at, err := payloadAt(rec, plen)
	return at + 5, err
}
