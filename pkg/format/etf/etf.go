// Package etf decodes and encodes the Erlang External Term Format (ETF),
// the output of term_to_binary/1, as documented in erts/doc/src/erl_ext_dist.xml
// of erlang/otp. RabbitMQ's message store bodies, ets:tab2file dumps and the
// ra log entries of quorum queues are all ETF. Every encoded term starts with
// the version byte 131 (0x83), then one tagged value:
//
//	131 | Tag:8 | payload (lengths are big-endian, 1, 2 or 4 bytes by tag)
//
// Decoding and skipping share one walker (decoder.term with build on or
// off), so DecodeTerm and SkipTerm always agree on n and on failure.
// Decoders never panic: corruption is a *format.CorruptError.
package etf

import (
	"github.com/storectl/storectl/pkg/format"
)

// Term is a decoded Erlang term. Its dynamic type is one of:
//
//	Atom         ATOM_EXT, SMALL_ATOM_EXT (Latin-1, converted to UTF-8), ATOM_UTF8_EXT, SMALL_ATOM_UTF8_EXT
//	int64        SMALL_INTEGER_EXT, INTEGER_EXT, and SMALL_BIG/LARGE_BIG values that fit
//	*big.Int     SMALL_BIG_EXT, LARGE_BIG_EXT values outside int64
//	float64      NEW_FLOAT_EXT, FLOAT_EXT
//	Binary       BINARY_EXT
//	BitBinary    BIT_BINARY_EXT
//	String       STRING_EXT (a list of small integers stored as bytes)
//	List         LIST_EXT (Tail is Nil{} for a proper list)
//	Nil          NIL_EXT ([])
//	Tuple        SMALL_TUPLE_EXT, LARGE_TUPLE_EXT
//	Map          MAP_EXT (entries in encoded order; order is not meaningful)
//	Opaque       pids, ports, references, NEW_FUN_EXT and EXPORT_EXT, kept as raw bytes
//
// Binary, BitBinary, String and Opaque alias the input slice.
type Term any

// Atom is an Erlang atom, as UTF-8 text.
type Atom string

// Binary is an Erlang binary (<<...>>).
type Binary []byte

// BitBinary is a bitstring whose last byte holds only Bits (1..8) bits.
type BitBinary struct {
	Bytes []byte
	Bits  uint8
}

// String is a STRING_EXT list: each byte is one list element 0..255.
type String []byte

// List is a non-empty list. Tail is Nil{} for a proper list and any other
// term for an improper one ([a|b]).
type List struct {
	Elems []Term
	Tail  Term
}

// Nil is the empty list [].
type Nil struct{}

// Tuple is an Erlang tuple.
type Tuple []Term

// MapEntry is one key/value pair of a Map.
type MapEntry struct {
	Key, Value Term
}

// Map is an Erlang map as a list of entries in encoded order.
type Map []MapEntry

// Opaque is a pid, port, reference or fun, not interpreted. Tag is the ETF
// tag and Raw the whole encoding including the tag byte.
type Opaque struct {
	Tag byte
	Raw []byte
}

// Version is the first byte of every term_to_binary result; the Tag
// constants are the ETF tags (erl_ext_dist).
const (
	Version           = 131
	TagNewFloat       = 70
	TagBitBinary      = 77
	TagCompressed     = 80
	TagAtomCacheRef   = 82
	TagNewPid         = 88
	TagNewPort        = 89
	TagNewerReference = 90
	TagSmallInteger   = 97
	TagInteger        = 98
	TagFloat          = 99
	TagAtom           = 100
	TagReference      = 101
	TagPort           = 102
	TagPid            = 103
	TagSmallTuple     = 104
	TagLargeTuple     = 105
	TagNil            = 106
	TagString         = 107
	TagList           = 108
	TagBinary         = 109
	TagSmallBig       = 110
	TagLargeBig       = 111
	TagNewFun         = 112
	TagExport         = 113
	TagNewReference   = 114
	TagSmallAtom      = 115
	TagMap            = 116
	TagFun            = 117
	TagAtomUTF8       = 118
	TagSmallAtomUTF8  = 119
	TagV4Port         = 120
	TagLocal          = 121
)

// MaxTermDepth bounds nesting of lists, tuples and maps. RabbitMQ message
// terms nest fewer than 20 levels (mc record, annotations, dead-letter
// history, nested AMQP header tables); 256 leaves room for deep client
// header tables while keeping the recursion on a small, bounded stack.
const MaxTermDepth = 256

// maxAtomChars is Erlang's atom length limit (255 characters);
// binary_to_term rejects longer atoms, so they are corruption here too.
const maxAtomChars = 255

// DecodeTerm decodes the term that starts at b[0] (the version byte 131)
// and returns it with the number of bytes it used. Bytes after the term are
// ignored. Errors are *format.CorruptError with Offset inside b.
func DecodeTerm(b []byte) (t Term, n int, err error) {
	return decodeAt(b, 0, true)
}

// SkipTerm validates the term that starts at b[0] exactly as DecodeTerm
// does and returns its length, without building Go values: on success it
// does not allocate (FLOAT_EXT aside). The scanner calls it per candidate.
func SkipTerm(b []byte) (n int, err error) {
	_, n, err = decodeAt(b, 0, false)
	return n, err
}

// DecodeExactTerm decodes b, which must be exactly one term: trailing bytes
// are an ErrInvalid at field "trailing".
func DecodeExactTerm(b []byte) (Term, error) {
	t, n, err := DecodeTerm(b)
	if err != nil {
		return nil, err
	}
	if n != len(b) {
		return nil, format.Corrupt(int64(n), "trailing", format.ErrInvalid)
	}
	return t, nil
}

// DecodeAt decodes like DecodeTerm and reports error offsets as base +
// position in b, for callers that hold b inside a larger file.
func DecodeAt(b []byte, base int64) (Term, int, error) {
	return decodeAt(b, base, true)
}

// SkipAt validates like SkipTerm and reports error offsets as base +
// position in b.
func SkipAt(b []byte, base int64) (int, error) {
	_, n, err := decodeAt(b, base, false)
	return n, err
}

// decodeAt is DecodeAt (build on) and SkipAt (build off).
func decodeAt(b []byte, base int64, build bool) (Term, int, error) {
	d := decoder{Cursor: format.Cursor{B: b}, build: build}
	if len(b) < 1 {
		return nil, 0, format.Corrupt(base, "version", format.ErrShort)
	}
	if b[0] != Version {
		return nil, 0, format.Corrupt(base, "version", format.ErrMagic)
	}
	d.Off = 1
	if len(b) > 1 && b[1] == TagCompressed {
		// term_to_binary/1 without the compressed option, which is what
		// RabbitMQ uses everywhere, never writes tag 80.
		return nil, 0, format.Corrupt(base+1, "tag", format.ErrUnsupported)
	}
	t := d.term(0)
	if d.Failed() {
		return nil, 0, d.Err(base)
	}
	return t, d.Off, nil
}

// decoder walks one term with a format.Cursor over the term's bytes
// (sticky first failure, its field and position). With build off nothing
// is allocated.
type decoder struct {
	format.Cursor
	build bool
}

// count reads a 32-bit element count and checks that count elements of at
// least minBytes each can still follow, so no allocation or loop is sized
// from an unchecked length.
func (d *decoder) count(field string, minBytes int) int {
	at := d.Off
	n := d.U32(field)
	if d.Failed() {
		return 0
	}
	if uint64(n)*uint64(minBytes) > uint64(len(d.B)-d.Off) {
		d.FailAt(at, field, format.ErrShort)
		return 0
	}
	return int(n)
}

// term decodes one tagged value. depth counts enclosing containers.
func (d *decoder) term(depth int) Term {
	if d.Failed() {
		return nil
	}
	if depth > MaxTermDepth {
		d.FailAt(d.Off, "depth", format.ErrTooLarge)
		return nil
	}
	at := d.Off
	tag := int(d.U8("tag"))
	if d.Failed() {
		return nil
	}
	switch tag {
	case TagSmallInteger:
		v := int(d.U8("smallInteger"))
		if d.Failed() || !d.build {
			return nil
		}
		return int64(v)
	case TagInteger:
		v := int32(d.U32("integer"))
		if d.Failed() || !d.build {
			return nil
		}
		return int64(v)
	case TagSmallBig:
		n := int(d.U8("bigLength"))
		return d.big(n)
	case TagLargeBig:
		n := d.count("bigLength", 1)
		return d.big(n)
	case TagNewFloat, TagFloat:
		return d.float(tag)
	case TagAtom, TagSmallAtom, TagAtomUTF8, TagSmallAtomUTF8:
		return d.atom(at, tag)
	case TagAtomCacheRef:
		d.FailAt(at, "tag", format.ErrUnsupported) // only valid inside distribution messages
		return nil
	case TagBinary:
		p := d.Take("binary", d.count("binaryLength", 1))
		if d.Failed() || !d.build {
			return nil
		}
		return Binary(p)
	case TagBitBinary:
		return d.bitBinary()
	case TagString:
		p := d.Take("string", int(d.U16("stringLength")))
		if d.Failed() || !d.build {
			return nil
		}
		return String(p)
	case TagNil:
		if !d.build {
			return nil
		}
		return Nil{}
	case TagList:
		return d.list(depth)
	case TagSmallTuple:
		return d.tuple(depth, int(d.U8("arity")))
	case TagLargeTuple:
		return d.tuple(depth, d.count("arity", 1))
	case TagMap:
		return d.mapTerm(depth)
	}
	return d.opaque(at, tag)
}
