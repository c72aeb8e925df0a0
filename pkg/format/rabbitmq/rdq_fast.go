package rabbitmq

// A scanner asks whether a record body is exactly one ETF term at every
// framed candidate, millions of times a GiB of small messages, and nearly
// every candidate is a real record of one shape: the #basic_message{} a
// 3.x broker writes,
//
//	{basic_message, {resource, VHost, exchange, Name}, [RoutingKey...],
//	 {content, ClassId, none, PropertiesBin, rabbit_framing_amqp_0_9_1, [Payload...]},
//	 Id, true | false}
//
// with binaries for VHost, Name, the routing keys, PropertiesBin, the
// payload fragments and Id. basicMessageShape checks that shape in one
// straight pass (the fixed tags and atoms compared as literal bytes,
// binary lengths in bounds), without the general walk's per-term
// dispatch and recursion: 60 ns against 160 a generated body
// (BenchmarkExactBody).
// It only ever accepts bytes etf.IsExactTerm accepts; anything else (an
// #mc{}, decoded properties, a list tail that is not [], other tags) is
// left to the general walk, so exactBody always equals etf.IsExactTerm
// (FuzzBasicMessageShape, TestBasicMessageShapeSameAsWalker).

import (
	"encoding/binary"

	"github.com/storectl/storectl/pkg/format/etf"
)

// exactBody reports etf.IsExactTerm(b), trying the common #basic_message{}
// shape first.
func exactBody(b []byte) bool {
	return basicMessageShape(b) || etf.IsExactTerm(b)
}

// basicMessageShape reports whether b is exactly one #basic_message{} term
// of the shape above, its atoms all SMALL_ATOM_UTF8_EXT (OTP 26+) or all
// ATOM_EXT (OTP ≤ 25). false means only "not this shape".
func basicMessageShape(b []byte) bool {
	var l *shapeLits
	switch {
	case len(b) >= len(shapeUTF8.head) && string(b[:len(shapeUTF8.head)]) == shapeUTF8.head:
		l = &shapeUTF8
	case len(b) >= len(shapeLatin1.head) && string(b[:len(shapeLatin1.head)]) == shapeLatin1.head:
		l = &shapeLatin1
	default:
		return false
	}
	p := shBin(b, len(l.head)) // virtual_host
	p = shLit(b, p, l.exchange)
	p = shBin(b, p)            // name
	p = shBinList(b, p)        // routing_keys
	p = shLit(b, p, l.content) // ... class_id's SMALL_INTEGER_EXT tag
	if p >= 0 {
		p++ // class_id (shLit checks the bounds)
	}
	p = shLit(b, p, l.none)     // properties
	p = shBin(b, p)             // properties_bin
	p = shLit(b, p, l.protocol) // protocol
	p = shBinList(b, p)         // payload_fragments_rev
	p = shBin(b, p)             // id
	if p < 0 {
		return false
	}
	// is_persistent, the last term: compared in place (a string
	// variable of it was a copy of the bytes a record, 0.9% of a
	// small-message scan's instructions).
	return string(b[p:]) == l.yes || string(b[p:]) == l.no
}

// shapeLits are the fixed bytes of the shape in one atom encoding: head
// is <<131, {basic_message, {resource,>>; content is <<{content,>> and
// the class id's tag.
type shapeLits struct {
	head, exchange, content, none, protocol, yes, no string
}

var (
	shapeUTF8   = makeShapeLits(etf.AtomsUTF8)
	shapeLatin1 = makeShapeLits(etf.AtomsLatin1)
)

func makeShapeLits(enc etf.AtomEncoding) shapeLits {
	atom := func(b []byte, s string) []byte {
		b, err := etf.AppendAtom(b, s, enc)
		if err != nil {
			panic(err) // the names are fixed ASCII atoms
		}
		return b
	}
	str := func(b []byte) string { return string(b) }
	tuple := func(n byte) []byte { return []byte{etf.TagSmallTuple, n} }
	return shapeLits{
		head:     str(append([]byte{etf.Version}, atom(tuple(6), "basic_message")...)) + str(atom(tuple(4), "resource")),
		exchange: str(atom(nil, "exchange")),
		content:  str(append(atom(tuple(6), "content"), etf.TagSmallInteger)),
		none:     str(atom(nil, "none")),
		protocol: str(atom(nil, "rabbit_framing_amqp_0_9_1")),
		yes:      str(atom(nil, "true")),
		no:       str(atom(nil, "false")),
	}
}

// The sh* steps read one term (or fixed bytes) at b[p] and return the
// offset after it, or -1 when it is not what is asked (or p is already
// -1), so the shape reads as a straight sequence of steps.

// shLit: the bytes lit.
func shLit(b []byte, p int, lit string) int {
	if p < 0 || len(b)-p < len(lit) || string(b[p:p+len(lit)]) != lit {
		return -1
	}
	return p + len(lit)
}

// shBin: a BINARY_EXT whose bytes lie inside b.
func shBin(b []byte, p int) int {
	if p < 0 || len(b)-p < 5 || b[p] != etf.TagBinary {
		return -1
	}
	n := uint64(binary.BigEndian.Uint32(b[p+1:]))
	if n > uint64(len(b)-p-5) {
		return -1
	}
	return p + 5 + int(n)
}

// shBinList: a proper list of binaries: NIL_EXT, or LIST_EXT of n
// BINARY_EXTs and a NIL_EXT tail.
func shBinList(b []byte, p int) int {
	if p < 0 || p >= len(b) {
		return -1
	}
	if b[p] == etf.TagNil {
		return p + 1
	}
	if len(b)-p < 5 || b[p] != etf.TagList {
		return -1
	}
	n := binary.BigEndian.Uint32(b[p+1:])
	p += 5
	if uint64(n) > uint64(len(b)-p) {
		return -1
	}
	for range n {
		if p = shBin(b, p); p < 0 {
			return -1
		}
	}
	if p >= len(b) || b[p] != etf.TagNil {
		return -1
	}
	return p + 1
}
