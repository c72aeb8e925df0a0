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
	// shallow: compound and array values are checked by their size and
	// count only, not walked (WalkSections).
	shallow bool
	err     *format.CorruptError
}

// The type of each format code, and whether the code is valid (a table,
// not a map: this is the scan's inner loop).
var (
	codeTypes [256]Type
	codeValid [256]bool
)

// Field names of sizes and counts, per type (made once: no
// concatenation on the hot path).
var sizeNames, countNames [Described + 1]string

func init() {
	for c, t := range codeType {
		codeTypes[c], codeValid[c] = t, true
	}
	for t := range sizeNames {
		sizeNames[t] = Type(t).String() + " size"
		countNames[t] = Type(t).String() + " count"
	}
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
	if !codeValid[code] {
		d.fail(cpos, "constructor", format.ErrMagic)
		return Value{}, pos
	}
	t := codeTypes[code]
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
		n, p := d.length(code, pos, t)
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
func (d *decoder) length(code byte, pos int, t Type) (int, int) {
	if code>>4&1 == 0 { // 0xa, 0xc, 0xe: one byte
		if !d.need(pos, 1, sizeNames[t]) {
			return 0, pos
		}
		return int(d.b[pos]), pos + 1
	}
	if !d.need(pos, 4, sizeNames[t]) {
		return 0, pos
	}
	n := be.Uint32(d.b[pos:])
	if int64(n) > int64(len(d.b)-pos-4) {
		d.fail(pos, sizeNames[t], format.ErrShort)
		return 0, pos
	}
	return int(n), pos + 4
}

// count reads the element count after a compound or array size (not
// bounded here: an array of zero-width elements has more elements than
// bytes; callers check it).
func (d *decoder) count(code byte, pos int, t Type) (int, int) {
	if code>>4&1 == 0 {
		if !d.need(pos, 1, countNames[t]) {
			return 0, pos
		}
		return int(d.b[pos]), pos + 1
	}
	if !d.need(pos, 4, countNames[t]) {
		return 0, pos
	}
	return int(be.Uint32(d.b[pos:])), pos + 4
}

func (d *decoder) compound(v Value, pos, depth int) (Value, int) {
	name := typeNames[v.Type]
	size, p := d.length(v.Code, pos, v.Type)
	if !d.need(p, size, name) {
		return Value{}, pos
	}
	end := p + size
	if depth >= MaxDepth {
		d.fail(pos, name, format.ErrTooLarge)
		return Value{}, pos
	}
	if d.shallow {
		return d.shallowCompound(v, p, end)
	}
	sub := *d
	sub.b = d.b[:end]
	n, q := sub.count(v.Code, p, v.Type)
	if sub.err != nil {
		d.err = sub.err
		return Value{}, pos
	}
	// Every element takes at least its constructor byte.
	if n > end-q {
		d.fail(p, countNames[v.Type], format.ErrTooLarge)
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
		d.fail(pos, sizeNames[v.Type], format.ErrInvalid)
		return Value{}, pos
	}
	return v, end
}

// shallowCompound checks a list's or map's count against its size
// without walking its items (the body is b[p:end]).
func (d *decoder) shallowCompound(v Value, p, end int) (Value, int) {
	w := 1
	if v.Code>>4&1 != 0 {
		w = 4
	}
	if end-p < w {
		d.fail(p, countNames[v.Type], format.ErrShort)
		return Value{}, p
	}
	n := int(d.b[p])
	if w == 4 {
		n = int(be.Uint32(d.b[p:]))
	}
	switch {
	case n > end-p-w:
		d.fail(p, countNames[v.Type], format.ErrTooLarge)
		return Value{}, p
	case v.Type == Map && n%2 != 0:
		d.fail(p, "map count", format.ErrInvalid)
		return Value{}, p
	case n == 0 && end != p+w:
		d.fail(p-w, sizeNames[v.Type], format.ErrInvalid)
		return Value{}, p
	}
	return v, end
}

func (d *decoder) array(v Value, pos, depth int) (Value, int) {
	size, p := d.length(v.Code, pos, Array)
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
	n, q := sub.count(v.Code, p, Array)
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
	if !codeValid[ec] {
		d.fail(cpos, "array constructor", format.ErrMagic)
		return Value{}, pos
	}
	v.ElemCode = ec
	if ec>>4 != 0x4 && n > end-q {
		// elements of every other width take at least a byte
		d.fail(p, "array count", format.ErrTooLarge)
		return Value{}, pos
	}
	if d.shallow {
		return v, end
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
