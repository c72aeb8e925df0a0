// Package rabbitmq writes RabbitMQ classic-queue store files for tests and
// benchmarks: .rdq records holding real-looking #basic_message{} (3.x) or
// #mc{} (4.x) terms, queue index v2 (.qi) files referencing them, zero
// holes, and the byte surgery the misread corpus needs (resizing a real
// record, setting its msg id). Everything is deterministic for a seed.
//
// It is the only code outside pkg/repair that writes store bytes; nothing
// in it is used by the scanner.
package rabbitmq

import (
	"encoding/binary"
	"math"
)

// ETF tags used by the encoder (erts/doc/src/erl_ext_dist.xml).
const (
	tagVersion    = 131
	tagSmallInt   = 97
	tagInteger    = 98
	tagSmallTuple = 104
	tagNil        = 106
	tagList       = 108
	tagBinary     = 109
	tagSmallBig   = 110
	tagMap        = 116
	tagSmallAtomU = 119
)

// Enc is a tiny ETF encoder: each method appends one term to B. Start a
// top-level term with Version.
type Enc struct{ B []byte }

// Version appends the ETF version byte 131.
func (e *Enc) Version() *Enc { e.B = append(e.B, tagVersion); return e }

// Atom appends SMALL_ATOM_UTF8_EXT (names up to 255 bytes).
func (e *Enc) Atom(s string) *Enc {
	e.B = append(e.B, tagSmallAtomU, byte(len(s)))
	e.B = append(e.B, s...)
	return e
}

// Bin appends BINARY_EXT.
func (e *Enc) Bin(b []byte) *Enc {
	e.B = append(e.B, tagBinary)
	e.B = binary.BigEndian.AppendUint32(e.B, uint32(len(b)))
	e.B = append(e.B, b...)
	return e
}

// Int appends the smallest integer encoding term_to_binary would use.
func (e *Enc) Int(v int64) *Enc {
	switch {
	case v >= 0 && v <= 255:
		e.B = append(e.B, tagSmallInt, byte(v))
	case v >= math.MinInt32 && v <= math.MaxInt32:
		e.B = append(e.B, tagInteger)
		e.B = binary.BigEndian.AppendUint32(e.B, uint32(int32(v)))
	default:
		sign, u := byte(0), uint64(v)
		if v < 0 {
			sign, u = 1, uint64(-v)
		}
		var digits []byte
		for u > 0 {
			digits = append(digits, byte(u))
			u >>= 8
		}
		e.B = append(e.B, tagSmallBig, byte(len(digits)), sign)
		e.B = append(e.B, digits...)
	}
	return e
}

// Tuple appends SMALL_TUPLE_EXT with arity n; the n elements follow.
func (e *Enc) Tuple(n int) *Enc { e.B = append(e.B, tagSmallTuple, byte(n)); return e }

// List appends LIST_EXT with n elements; the elements and then the tail
// (Nil for a proper list) follow.
func (e *Enc) List(n int) *Enc {
	e.B = append(e.B, tagList)
	e.B = binary.BigEndian.AppendUint32(e.B, uint32(n))
	return e
}

// Nil appends NIL_EXT ([]).
func (e *Enc) Nil() *Enc { e.B = append(e.B, tagNil); return e }

// Map appends MAP_EXT with n pairs; the keys and values follow.
func (e *Enc) Map(n int) *Enc {
	e.B = append(e.B, tagMap)
	e.B = binary.BigEndian.AppendUint32(e.B, uint32(n))
	return e
}
