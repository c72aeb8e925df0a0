package amqp10

import (
	"github.com/storectl/storectl/pkg/format"
)

// MaxDepth bounds the nesting of compound and described values.
const MaxDepth = 64

// zeroWidthSlack is how many values beyond one per input byte a decode
// may produce: only arrays of zero-width elements (null, true, uint0, ...)
// yield values without consuming bytes, and a hostile count must not turn
// nine bytes into a billion of them.
const zeroWidthSlack = 1 << 16

// Decode decodes the value at the start of b; off is the absolute offset
// of b[0] (for errors). It returns the value and the bytes it took.
// Binary, string and symbol values alias b.
func Decode(b []byte, off int64) (Value, int, error) {
	d := decoder{b: b, base: off, budget: len(b) + zeroWidthSlack, build: true}
	v, n := d.value(0, 0)
	if d.err != nil {
		return Value{}, 0, d.err
	}
	return v, n, nil
}

// Skip returns the length of the value at the start of b without
// building it (no allocation), or the error Decode would return.
func Skip(b []byte, off int64) (int, error) {
	d := decoder{b: b, base: off, budget: len(b) + zeroWidthSlack}
	_, n := d.value(0, 0)
	if d.err != nil {
		return 0, d.err
	}
	return n, nil
}

type decoder struct {
	b      []byte
	base   int64
	budget int
	build  bool
	err    *format.CorruptError
}

func (d *decoder) fail(pos int, field string, err error) {
	if d.err == nil {
		d.err = format.Corrupt(d.base+int64(pos), field, err)
	}
}

// need checks that n bytes are available at pos.
func (d *decoder) need(pos, n int, field string) bool {
	if d.err != nil {
		return false
	}
	if n < 0 || n > len(d.b)-pos {
		d.fail(pos, field, format.ErrShort)
		return false
	}
	return true
}

// value decodes a constructor and its value at pos; it returns the
// position after it.
func (d *decoder) value(pos, depth int) (Value, int) {
	if !d.need(pos, 1, "constructor") {
		return Value{}, pos
	}
	code := d.b[pos]
	if code == codeDescribed {
		if depth >= MaxDepth {
			d.fail(pos, "described", format.ErrTooLarge)
			return Value{}, pos
		}
		desc, p := d.value(pos+1, depth+1)
		inner, p := d.value(p, depth+1)
		if d.err != nil {
			return Value{}, pos
		}
		v := Value{Type: Described}
		if d.build {
			v.Items = []Value{desc, inner}
		}
		return v, p
	}
	return d.body(code, pos, pos+1, depth)
}

// body decodes the value of format code code whose bytes start at pos
// (cpos is where the constructor was, for errors).
func (d *decoder) body(code byte, cpos, pos, depth int) (Value, int) {
	t, ok := codeType[code]
	if !ok {
		d.fail(cpos, "constructor", format.ErrMagic)
		return Value{}, pos
	}
	d.budget--
	if d.budget < 0 {
		d.fail(cpos, "value count", format.ErrTooLarge)
		return Value{}, pos
	}
	v := Value{Type: t, Code: code}
	switch code >> 4 {
	case 0x4: // fixed width 0
		switch code {
		case codeTrue:
			v.Num = 1
		}
		return v, pos
	case 0x5:
		if !d.need(pos, 1, t.String()) {
			return Value{}, pos
		}
		x := d.b[pos]
		switch code {
		case codeByte, codeSmallInt, codeSmallLong:
			v.Num = uint64(int64(int8(x)))
		case codeBoolean:
			if x > 1 {
				d.fail(pos, "boolean", format.ErrInvalid)
				return Value{}, pos
			}
			v.Num = uint64(x)
		default:
			v.Num = uint64(x)
		}
		return v, pos + 1
	case 0x6:
		if !d.need(pos, 2, t.String()) {
			return Value{}, pos
		}
		x := be.Uint16(d.b[pos:])
		if code == codeShort {
			v.Num = uint64(int64(int16(x)))
		} else {
			v.Num = uint64(x)
		}
		return v, pos + 2
	case 0x7:
		if !d.need(pos, 4, t.String()) {
			return Value{}, pos
		}
		x := be.Uint32(d.b[pos:])
		if code == codeInt {
			v.Num = uint64(int64(int32(x)))
		} else {
			v.Num = uint64(x)
		}
		return v, pos + 4
	case 0x8:
		if !d.need(pos, 8, t.String()) {
			return Value{}, pos
		}
		v.Num = be.Uint64(d.b[pos:])
		return v, pos + 8
	case 0x9:
		if !d.need(pos, 16, t.String()) {
			return Value{}, pos
		}
		v.Bytes = d.b[pos : pos+16 : pos+16]
		return v, pos + 16
	case 0xa, 0xb:
		n, p := d.length(code, pos, t.String())
		if !d.need(p, n, t.String()) {
			return Value{}, pos
		}
		v.Bytes = d.b[p : p+n : p+n]
		return v, p + n
	case 0xc, 0xd:
		return d.compound(v, pos, depth)
	case 0xe, 0xf:
		return d.array(v, pos, depth)
	}
	d.fail(cpos, "constructor", format.ErrMagic)
	return Value{}, pos
}

// length reads the 1- or 4-byte size of a variable or compound value.
func (d *decoder) length(code byte, pos int, field string) (int, int) {
	if code>>4&1 == 0 { // 0xa, 0xc, 0xe: one byte
		if !d.need(pos, 1, field+" size") {
			return 0, pos
		}
		return int(d.b[pos]), pos + 1
	}
	if !d.need(pos, 4, field+" size") {
		return 0, pos
	}
	n := be.Uint32(d.b[pos:])
	if int64(n) > int64(len(d.b)-pos-4) {
		d.fail(pos, field+" size", format.ErrShort)
		return 0, pos
	}
	return int(n), pos + 4
}

// count reads the element count after a compound or array size (not
// bounded here: an array of zero-width elements has more elements than
// bytes; callers check it).
func (d *decoder) count(code byte, pos int, field string) (int, int) {
	if code>>4&1 == 0 {
		if !d.need(pos, 1, field+" count") {
			return 0, pos
		}
		return int(d.b[pos]), pos + 1
	}
	if !d.need(pos, 4, field+" count") {
		return 0, pos
	}
	return int(be.Uint32(d.b[pos:])), pos + 4
}

func (d *decoder) compound(v Value, pos, depth int) (Value, int) {
	name := v.Type.String()
	size, p := d.length(v.Code, pos, name)
	if !d.need(p, size, name) {
		return Value{}, pos
	}
	end := p + size
	if depth >= MaxDepth {
		d.fail(pos, name, format.ErrTooLarge)
		return Value{}, pos
	}
	sub := *d
	sub.b = d.b[:end]
	n, q := sub.count(v.Code, p, name)
	if sub.err != nil {
		d.err = sub.err
		return Value{}, pos
	}
	// Every element takes at least its constructor byte.
	if n > end-q {
		d.fail(p, name+" count", format.ErrTooLarge)
		return Value{}, pos
	}
	if v.Type == Map && n%2 != 0 {
		d.fail(p, "map count", format.ErrInvalid)
		return Value{}, pos
	}
	if d.build && n > 0 {
		v.Items = make([]Value, 0, n)
	}
	for range n {
		var it Value
		it, q = sub.value(q, depth+1)
		if sub.err != nil {
			break
		}
		if d.build {
			v.Items = append(v.Items, it)
		}
	}
	d.budget = sub.budget
	if sub.err != nil {
		d.err = sub.err
		return Value{}, pos
	}
	if q != end {
		d.fail(pos, name+" size", format.ErrInvalid)
		return Value{}, pos
	}
	return v, end
}

func (d *decoder) array(v Value, pos, depth int) (Value, int) {
	size, p := d.length(v.Code, pos, "array")
	if !d.need(p, size, "array") {
		return Value{}, pos
	}
	end := p + size
	if depth >= MaxDepth {
		d.fail(pos, "array", format.ErrTooLarge)
		return Value{}, pos
	}
	sub := *d
	sub.b = d.b[:end]
	n, q := sub.count(v.Code, p, "array")
	if sub.err != nil {
		d.err = sub.err
		return Value{}, pos
	}
	if !sub.need(q, 1, "array constructor") {
		d.err = sub.err
		return Value{}, pos
	}
	cpos := q
	if sub.b[q] == codeDescribed {
		desc, r := sub.value(q+1, depth+1)
		if sub.err != nil {
			d.err = sub.err
			return Value{}, pos
		}
		if d.build {
			v.ElemDesc = &desc
		}
		q = r
		if !sub.need(q, 1, "array constructor") {
			d.err = sub.err
			return Value{}, pos
		}
		cpos = q
	}
	ec := sub.b[q]
	q++
	if _, ok := codeType[ec]; !ok {
		d.fail(cpos, "array constructor", format.ErrMagic)
		return Value{}, pos
	}
	v.ElemCode = ec
	if ec>>4 != 0x4 && n > end-q {
		// elements of every other width take at least a byte
		d.fail(p, "array count", format.ErrTooLarge)
		return Value{}, pos
	}
	if d.build && n > 0 {
		v.Items = make([]Value, 0, min(n, end-q+zeroWidthSlack))
	}
	for range n {
		var it Value
		it, q = sub.body(ec, cpos, q, depth+1)
		if sub.err != nil {
			break
		}
		if d.build {
			if v.ElemDesc != nil {
				it = Value{Type: Described, Items: []Value{*v.ElemDesc, it}}
			}
			v.Items = append(v.Items, it)
		}
	}
	d.budget = sub.budget
	if sub.err != nil {
		d.err = sub.err
		return Value{}, pos
	}
	if q != end {
		d.fail(pos, "array size", format.ErrInvalid)
		return Value{}, pos
	}
	return v, end
}
