// Package amqp10 decodes and encodes the AMQP 1.0 type system (OASIS AMQP
// 1.0 part 1, "Types") and the bare and annotated message built from it
// (part 3, §3.2 "Message Format"): header, delivery and message
// annotations, properties, application properties, data, amqp-sequence,
// amqp-value and footer sections.
//
// RabbitMQ stores every stream entry in this encoding (osiris entries
// written by rabbit_stream_queue from 3.9 on, and by the stream plugin's
// clients), so the stream scanner reads messages through this package.
// It knows nothing about RabbitMQ: the mapping of sections to AMQP 0-9-1
// properties lives with the scanner.
//
// A decoded Value keeps the format code it was read with, so Append
// re-encodes it byte for byte; values built with the constructors (Ulong,
// String, List, ...) have no code and are encoded in their smallest form,
// as RabbitMQ's amqp10_binary_generator does. Decoders never panic and
// never allocate from an unchecked length: malformed input is a
// *format.CorruptError with the byte offset.
package amqp10

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Type is the kind of a value (AMQP 1.0 §1.6 primitive types, plus
// Described for a described type).
type Type uint8

// The AMQP 1.0 types.
const (
	Null Type = iota
	Boolean
	Ubyte
	Ushort
	Uint
	Ulong
	Byte
	Short
	Int
	Long
	Float
	Double
	Decimal32
	Decimal64
	Decimal128
	Char
	Timestamp
	UUID
	Binary
	String
	Symbol
	List
	Map
	Array
	Described
)

var typeNames = [...]string{
	Null: "null", Boolean: "boolean", Ubyte: "ubyte", Ushort: "ushort", Uint: "uint", Ulong: "ulong",
	Byte: "byte", Short: "short", Int: "int", Long: "long", Float: "float", Double: "double",
	Decimal32: "decimal32", Decimal64: "decimal64", Decimal128: "decimal128", Char: "char",
	Timestamp: "timestamp", UUID: "uuid", Binary: "binary", String: "string", Symbol: "symbol",
	List: "list", Map: "map", Array: "array", Described: "described",
}

func (t Type) String() string {
	if int(t) < len(typeNames) {
		return typeNames[t]
	}
	return fmt.Sprintf("type(%d)", uint8(t))
}

// Format codes (AMQP 1.0 §1.6). The high nibble is the width category.
const (
	codeDescribed  = 0x00
	codeNull       = 0x40
	codeTrue       = 0x41
	codeFalse      = 0x42
	codeUint0      = 0x43
	codeUlong0     = 0x44
	codeList0      = 0x45
	codeUbyte      = 0x50
	codeByte       = 0x51
	codeSmallUint  = 0x52
	codeSmallUlong = 0x53
	codeSmallInt   = 0x54
	codeSmallLong  = 0x55
	codeBoolean    = 0x56
	codeUshort     = 0x60
	codeShort      = 0x61
	codeUint       = 0x70
	codeInt        = 0x71
	codeFloat      = 0x72
	codeChar       = 0x73
	codeDecimal32  = 0x74
	codeUlong      = 0x80
	codeLong       = 0x81
	codeDouble     = 0x82
	codeTimestamp  = 0x83
	codeDecimal64  = 0x84
	codeDecimal128 = 0x94
	codeUUID       = 0x98
	codeVbin8      = 0xa0
	codeStr8       = 0xa1
	codeSym8       = 0xa3
	codeVbin32     = 0xb0
	codeStr32      = 0xb1
	codeSym32      = 0xb3
	codeList8      = 0xc0
	codeMap8       = 0xc1
	codeList32     = 0xd0
	codeMap32      = 0xd1
	codeArray8     = 0xe0
	codeArray32    = 0xf0
)

// codeType maps a format code to its type; absent codes are invalid.
var codeType = map[byte]Type{
	codeNull: Null, codeTrue: Boolean, codeFalse: Boolean, codeBoolean: Boolean,
	codeUbyte: Ubyte, codeUshort: Ushort, codeUint: Uint, codeSmallUint: Uint, codeUint0: Uint,
	codeUlong: Ulong, codeSmallUlong: Ulong, codeUlong0: Ulong,
	codeByte: Byte, codeShort: Short, codeInt: Int, codeSmallInt: Int, codeLong: Long, codeSmallLong: Long,
	codeFloat: Float, codeDouble: Double, codeDecimal32: Decimal32, codeDecimal64: Decimal64,
	codeDecimal128: Decimal128, codeChar: Char, codeTimestamp: Timestamp, codeUUID: UUID,
	codeVbin8: Binary, codeVbin32: Binary, codeStr8: String, codeStr32: String, codeSym8: Symbol, codeSym32: Symbol,
	codeList0: List, codeList8: List, codeList32: List, codeMap8: Map, codeMap32: Map,
	codeArray8: Array, codeArray32: Array,
}

// Value is one AMQP 1.0 value. Num holds the integer types (signed ones
// two's complement), booleans (0 or 1), char, timestamp (ms since the
// epoch, two's complement) and the bits of float, double, decimal32 and
// decimal64; Bytes holds binary, string, symbol, uuid and decimal128
// (aliasing the decoded input); Items holds list and array elements, map
// keys and values alternating, and for Described the descriptor then the
// value.
type Value struct {
	Type  Type
	Code  byte // format code it was decoded with; 0 = smallest form when encoding
	Num   uint64
	Bytes []byte
	Items []Value
	// ElemCode is an array's element constructor (0 = smallest form);
	// for an array of described values, ElemDesc is their descriptor.
	ElemCode byte
	ElemDesc *Value
}

// Constructors for encoding.

func NullValue() Value           { return Value{Type: Null} }
func Bool(b bool) Value          { v := Value{Type: Boolean}; v.Num = b2u(b); return v }
func UbyteValue(n uint8) Value   { return Value{Type: Ubyte, Num: uint64(n)} }
func UshortValue(n uint16) Value { return Value{Type: Ushort, Num: uint64(n)} }
func UintValue(n uint32) Value   { return Value{Type: Uint, Num: uint64(n)} }
func UlongValue(n uint64) Value  { return Value{Type: Ulong, Num: n} }
func ByteValue(n int8) Value     { return Value{Type: Byte, Num: uint64(int64(n))} }
func ShortValue(n int16) Value   { return Value{Type: Short, Num: uint64(int64(n))} }
func IntValue(n int32) Value     { return Value{Type: Int, Num: uint64(int64(n))} }
func LongValue(n int64) Value    { return Value{Type: Long, Num: uint64(n)} }
func FloatValue(f float32) Value { return Value{Type: Float, Num: uint64(math.Float32bits(f))} }
func DoubleValue(f float64) Value {
	return Value{Type: Double, Num: math.Float64bits(f)}
}
func TimestampValue(ms int64) Value { return Value{Type: Timestamp, Num: uint64(ms)} }
func UUIDValue(u [16]byte) Value    { return Value{Type: UUID, Bytes: u[:]} }
func BinaryValue(b []byte) Value    { return Value{Type: Binary, Bytes: b} }
func StringValue(s string) Value    { return Value{Type: String, Bytes: []byte(s)} }
func SymbolValue(s string) Value    { return Value{Type: Symbol, Bytes: []byte(s)} }
func ListValue(items ...Value) Value {
	return Value{Type: List, Items: items}
}

// MapValue builds a map from alternating keys and values.
func MapValue(kv ...Value) Value { return Value{Type: Map, Items: kv} }

// ArrayValue builds an array; every element must have type elem.
func ArrayValue(elem Type, items ...Value) Value {
	return Value{Type: Array, Items: items, ElemCode: smallestArrayCode(elem, items)}
}

// DescribedValue builds a described value.
func DescribedValue(descriptor, v Value) Value {
	return Value{Type: Described, Items: []Value{descriptor, v}}
}

func b2u(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}

// IsNull reports whether v is null (also the zero Value).
func (v Value) IsNull() bool { return v.Type == Null }

// Bool is a boolean's value.
func (v Value) Bool() bool { return v.Num != 0 }

// Int is a signed integer's (or timestamp's) value.
func (v Value) Int() int64 {
	switch v.Type {
	case Byte:
		return int64(int8(v.Num))
	case Short:
		return int64(int16(v.Num))
	case Int:
		return int64(int32(v.Num))
	}
	return int64(v.Num)
}

// Float is a float's or double's value.
func (v Value) Float() float64 {
	if v.Type == Float {
		return float64(math.Float32frombits(uint32(v.Num)))
	}
	return math.Float64frombits(v.Num)
}

// Str is a string's or symbol's text.
func (v Value) Str() string { return string(v.Bytes) }

// Descriptor and Inner split a described value.
func (v Value) Descriptor() Value {
	if v.Type != Described || len(v.Items) != 2 {
		return Value{}
	}
	return v.Items[0]
}

// Inner is a described value's value.
func (v Value) Inner() Value {
	if v.Type != Described || len(v.Items) != 2 {
		return Value{}
	}
	return v.Items[1]
}

// Pairs returns a map's entries as (key, value) pairs in encoded order.
func (v Value) Pairs() [][2]Value {
	out := make([][2]Value, 0, len(v.Items)/2)
	for i := 0; i+1 < len(v.Items); i += 2 {
		out = append(out, [2]Value{v.Items[i], v.Items[i+1]})
	}
	return out
}

// Lookup returns the value of the first map entry whose key has type t
// and text key (string and symbol keys).
func (v Value) Lookup(t Type, key string) (Value, bool) {
	for i := 0; i+1 < len(v.Items); i += 2 {
		k := v.Items[i]
		if k.Type == t && string(k.Bytes) == key {
			return v.Items[i+1], true
		}
	}
	return Value{}, false
}

// UUIDString formats a uuid in the canonical 8-4-4-4-12 form.
func UUIDString(b []byte) string {
	if len(b) != 16 {
		return hex.EncodeToString(b)
	}
	h := hex.EncodeToString(b)
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// String renders v for humans: scalars as their value, strings quoted,
// binary as hex, compounds in brackets.
func (v Value) String() string {
	var sb strings.Builder
	v.format(&sb)
	return sb.String()
}

func (v Value) format(sb *strings.Builder) {
	switch v.Type {
	case Null:
		sb.WriteString("null")
	case Boolean:
		sb.WriteString(strconv.FormatBool(v.Bool()))
	case Ubyte, Ushort, Uint, Ulong:
		sb.WriteString(strconv.FormatUint(v.Num, 10))
	case Byte, Short, Int, Long, Timestamp:
		sb.WriteString(strconv.FormatInt(v.Int(), 10))
	case Float, Double:
		sb.WriteString(strconv.FormatFloat(v.Float(), 'g', -1, 64))
	case Char:
		sb.WriteString(strconv.QuoteRune(rune(v.Num)))
	case Decimal32, Decimal64:
		fmt.Fprintf(sb, "%s(0x%x)", v.Type, v.Num)
	case Decimal128:
		fmt.Fprintf(sb, "decimal128(0x%x)", v.Bytes)
	case UUID:
		sb.WriteString(UUIDString(v.Bytes))
	case Binary:
		sb.WriteString("0x" + hex.EncodeToString(v.Bytes))
	case String:
		sb.WriteString(strconv.Quote(string(v.Bytes)))
	case Symbol:
		sb.WriteString(":" + string(v.Bytes))
	case List, Array:
		sb.WriteByte('[')
		for i, it := range v.Items {
			if i > 0 {
				sb.WriteString(", ")
			}
			it.format(sb)
		}
		sb.WriteByte(']')
	case Map:
		sb.WriteByte('{')
		for i := 0; i+1 < len(v.Items); i += 2 {
			if i > 0 {
				sb.WriteString(", ")
			}
			v.Items[i].format(sb)
			sb.WriteString(": ")
			v.Items[i+1].format(sb)
		}
		sb.WriteByte('}')
	case Described:
		sb.WriteString("described(")
		v.Descriptor().format(sb)
		sb.WriteString(", ")
		v.Inner().format(sb)
		sb.WriteByte(')')
	default:
		sb.WriteString(v.Type.String())
	}
}

// be is the byte order of every AMQP 1.0 integer.
var be = binary.BigEndian
