package streamtest

import (
	"strconv"
	"strings"

	"github.com/storectl/storectl/pkg/format/amqp10"
)

// Erl renders an AMQP 1.0 value the way the dump oracle printed the
// terms amqp10_binary_parser makes of it (io_lib "~0p"): {utf8,<<"m1">>},
// {int,5}, true, {binary,<<0,1,255>>}, ...
func Erl(v amqp10.Value) string {
	var sb strings.Builder
	erl(&sb, v, false)
	return sb.String()
}

// Erl310 is Erl for RabbitMQ 3.10's amqp10_binary_parser, which makes
// {boolean,B} of a one-byte boolean (0x56) where 4.0's makes B.
func Erl310(v amqp10.Value) string {
	var sb strings.Builder
	erl(&sb, v, true)
	return sb.String()
}

// ErlField renders a header or properties field: null is undefined (the
// record default amqp10_framing leaves for it).
func ErlField(v amqp10.Value) string {
	if v.IsNull() {
		return "undefined"
	}
	return Erl(v)
}

// ErlField310 is ErlField with Erl310.
func ErlField310(v amqp10.Value) string {
	if v.IsNull() {
		return "undefined"
	}
	return Erl310(v)
}

var erlTags = map[amqp10.Type]string{
	amqp10.Ubyte: "ubyte", amqp10.Ushort: "ushort", amqp10.Uint: "uint", amqp10.Ulong: "ulong",
	amqp10.Byte: "byte", amqp10.Short: "short", amqp10.Int: "int", amqp10.Long: "long",
	amqp10.Timestamp: "timestamp", amqp10.Char: "char",
}

func erl(sb *strings.Builder, v amqp10.Value, old bool) {
	switch v.Type {
	case amqp10.Null:
		sb.WriteString("null")
	case amqp10.Boolean:
		if old && v.Code == 0x56 {
			sb.WriteString("{boolean," + strconv.FormatBool(v.Bool()) + "}")
			return
		}
		sb.WriteString(strconv.FormatBool(v.Bool()))
	case amqp10.Ubyte, amqp10.Ushort, amqp10.Uint, amqp10.Ulong, amqp10.Char:
		sb.WriteString("{" + erlTags[v.Type] + "," + strconv.FormatUint(v.Num, 10) + "}")
	case amqp10.Byte, amqp10.Short, amqp10.Int, amqp10.Long, amqp10.Timestamp:
		sb.WriteString("{" + erlTags[v.Type] + "," + strconv.FormatInt(v.Int(), 10) + "}")
	case amqp10.Float, amqp10.Double:
		tag := "double"
		if v.Type == amqp10.Float {
			tag = "float"
		}
		sb.WriteString("{" + tag + "," + erlFloat(v.Float()) + "}")
	case amqp10.UUID:
		sb.WriteString("{uuid," + ErlBinary(v.Bytes) + "}")
	case amqp10.Binary:
		sb.WriteString("{binary," + ErlBinary(v.Bytes) + "}")
	case amqp10.String:
		sb.WriteString("{utf8," + ErlBinary(v.Bytes) + "}")
	case amqp10.Symbol:
		sb.WriteString("{symbol," + ErlBinary(v.Bytes) + "}")
	case amqp10.List:
		sb.WriteString("{list,[")
		for i, it := range v.Items {
			if i > 0 {
				sb.WriteByte(',')
			}
			erl(sb, it, old)
		}
		sb.WriteString("]}")
	case amqp10.Map:
		sb.WriteString("{map,[")
		for i := 0; i+1 < len(v.Items); i += 2 {
			if i > 0 {
				sb.WriteByte(',')
			}
			sb.WriteByte('{')
			erl(sb, v.Items[i], old)
			sb.WriteByte(',')
			erl(sb, v.Items[i+1], old)
			sb.WriteByte('}')
		}
		sb.WriteString("]}")
	case amqp10.Described:
		sb.WriteString("{described,")
		erl(sb, v.Descriptor(), old)
		sb.WriteByte(',')
		erl(sb, v.Inner(), old)
		sb.WriteByte('}')
	default:
		sb.WriteString(v.String())
	}
}

// erlFloat prints a float as Erlang's shortest form does (400.5, 2.0).
func erlFloat(f float64) string {
	s := strconv.FormatFloat(f, 'g', -1, 64)
	if !strings.ContainsAny(s, ".e") {
		s += ".0"
	}
	return s
}

// ErlBinary prints a binary as io_lib "~p" does: <<"text">> when every
// byte is printable Latin-1, else the byte values.
func ErlBinary(b []byte) string {
	if len(b) == 0 {
		return "<<>>"
	}
	printable := true
	for _, c := range b {
		if !(c >= 32 && c <= 126 || c >= 160 || strings.IndexByte("\n\r\t\v\b\f\x1b", c) >= 0) {
			printable = false
			break
		}
	}
	var sb strings.Builder
	sb.WriteString("<<")
	if printable {
		sb.WriteByte('"')
		for _, c := range b {
			switch c {
			case '"':
				sb.WriteString(`\"`)
			case '\\':
				sb.WriteString(`\\`)
			case '\n':
				sb.WriteString(`\n`)
			case '\r':
				sb.WriteString(`\r`)
			case '\t':
				sb.WriteString(`\t`)
			case '\v':
				sb.WriteString(`\v`)
			case '\b':
				sb.WriteString(`\b`)
			case '\f':
				sb.WriteString(`\f`)
			case 0x1b:
				sb.WriteString(`\e`)
			default:
				sb.WriteRune(rune(c))
			}
		}
		sb.WriteByte('"')
	} else {
		for i, c := range b {
			if i > 0 {
				sb.WriteByte(',')
			}
			sb.WriteString(strconv.Itoa(int(c)))
		}
	}
	sb.WriteString(">>")
	return sb.String()
}
