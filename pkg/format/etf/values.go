package etf

// Value decoders for the ETF walker in etf.go: numbers, atoms, bitstrings,
// containers and the opaque pid/port/reference/fun encodings.

import (
	"math"
	"math/big"
	"strconv"
	"unicode/utf8"

	"github.com/storectl/storectl/pkg/format"
)

// big reads the sign byte and n little-endian digit bytes of a bignum.
func (d *decoder) big(n int) Term {
	sign := int(d.U8("bigSign"))
	digits := d.Take("bigDigits", n)
	if d.Failed() {
		return nil
	}
	if !d.build {
		return nil
	}
	top := len(digits)
	for top > 0 && digits[top-1] == 0 {
		top--
	}
	if top <= 8 {
		var mag uint64
		for i := top - 1; i >= 0; i-- {
			mag = mag<<8 | uint64(digits[i])
		}
		if sign == 0 && mag <= math.MaxInt64 {
			return int64(mag)
		}
		if sign != 0 && mag <= 1<<63 {
			return int64(-mag) // -(1<<63) wraps to MinInt64, which is right
		}
	}
	be := make([]byte, top)
	for i := 0; i < top; i++ {
		be[top-1-i] = digits[i]
	}
	v := new(big.Int).SetBytes(be)
	if sign != 0 {
		v.Neg(v)
	}
	return v
}

// float reads NEW_FLOAT_EXT (IEEE 754 binary64) or the old FLOAT_EXT, a
// 31-byte NUL-padded "%.20e" string. Erlang floats are always finite.
func (d *decoder) float(tag int) Term {
	at := d.Off
	var v float64
	if tag == TagNewFloat {
		p := d.Take("float", 8)
		if d.Failed() {
			return nil
		}
		var bits uint64
		for _, c := range p {
			bits = bits<<8 | uint64(c)
		}
		v = math.Float64frombits(bits)
	} else {
		p := d.Take("float", 31)
		if d.Failed() {
			return nil
		}
		end := len(p)
		for end > 0 && p[end-1] == 0 {
			end--
		}
		f, err := strconv.ParseFloat(string(p[:end]), 64)
		if err != nil {
			d.FailAt(at, "float", format.ErrInvalid)
			return nil
		}
		v = f
	}
	if math.IsNaN(v) || math.IsInf(v, 0) {
		d.FailAt(at, "float", format.ErrInvalid)
		return nil
	}
	if !d.build {
		return nil
	}
	return v
}

// atom reads any of the four atom encodings. Latin-1 atoms are converted
// to UTF-8; UTF-8 atoms must be valid and at most 255 characters, as
// binary_to_term requires.
func (d *decoder) atom(at, tag int) Term {
	var n int
	if tag == TagSmallAtom || tag == TagSmallAtomUTF8 {
		n = int(d.U8("atomLength"))
	} else {
		n = int(d.U16("atomLength"))
	}
	p := d.Take("atom", n)
	if d.Failed() {
		return nil
	}
	latin1 := tag == TagAtom || tag == TagSmallAtom
	if latin1 {
		if n > maxAtomChars {
			d.FailAt(at, "atomLength", format.ErrTooLarge)
			return nil
		}
	} else if !utf8.Valid(p) {
		d.FailAt(at+1, "atom", format.ErrInvalid)
		return nil
	} else if n > maxAtomChars && utf8.RuneCount(p) > maxAtomChars { // runes ≤ bytes
		d.FailAt(at, "atomLength", format.ErrTooLarge)
		return nil
	}
	if !d.build {
		return nil
	}
	if !latin1 {
		return Atom(p)
	}
	r := make([]rune, len(p))
	for i, c := range p {
		r[i] = rune(c)
	}
	return Atom(string(r))
}

// bitBinary reads BIT_BINARY_EXT: Len:32, Bits:8, Len bytes. Bits is the
// number of used bits in the last byte: 1..8, and 0 only when Len is 0.
func (d *decoder) bitBinary() Term {
	n := d.count("binaryLength", 1)
	at := d.Off
	bits := int(d.U8("bits"))
	p := d.Take("binary", n)
	if d.Failed() {
		return nil
	}
	if bits > 8 || (bits == 0) != (n == 0) {
		d.FailAt(at, "bits", format.ErrInvalid)
		return nil
	}
	if !d.build {
		return nil
	}
	return BitBinary{Bytes: p, Bits: uint8(bits)}
}

// list reads LIST_EXT: Length:32, Length elements, then the tail term.
// A length of 0 decodes as the tail itself, as binary_to_term does.
func (d *decoder) list(depth int) Term {
	n := d.count("listLength", 1)
	var elems []Term
	if d.build && !d.Failed() {
		elems = make([]Term, 0, n)
	}
	for i := 0; i < n && !d.Failed(); i++ {
		e := d.term(depth + 1)
		if d.build {
			elems = append(elems, e)
		}
	}
	tail := d.term(depth + 1)
	if d.Failed() || !d.build {
		return nil
	}
	if n == 0 {
		return tail
	}
	return List{Elems: elems, Tail: tail}
}

// tuple reads n elements; n was already checked against the input.
func (d *decoder) tuple(depth, n int) Term {
	var elems Tuple
	if d.build && !d.Failed() {
		elems = make(Tuple, 0, n)
	}
	for i := 0; i < n && !d.Failed(); i++ {
		e := d.term(depth + 1)
		if d.build {
			elems = append(elems, e)
		}
	}
	if d.Failed() || !d.build {
		return nil
	}
	return elems
}

// mapTerm reads MAP_EXT: Arity:32, then Arity key/value pairs (each at
// least 2 bytes). Duplicate keys are not checked.
func (d *decoder) mapTerm(depth int) Term {
	n := d.count("mapArity", 2)
	var m Map
	if d.build && !d.Failed() {
		m = make(Map, 0, n)
	}
	for i := 0; i < n && !d.Failed(); i++ {
		k := d.term(depth + 1)
		v := d.term(depth + 1)
		if d.build {
			m = append(m, MapEntry{Key: k, Value: v})
		}
	}
	if d.Failed() || !d.build {
		return nil
	}
	return m
}

// node reads the node-name atom of a pid, port or reference.
func (d *decoder) node() {
	if d.Failed() {
		return
	}
	at := d.Off
	tag := int(d.U8("node"))
	switch tag {
	case TagAtom, TagSmallAtom, TagAtomUTF8, TagSmallAtomUTF8:
		build := d.build
		d.build = false
		d.atom(at, tag)
		d.build = build
	default:
		d.FailAt(at, "node", format.ErrInvalid)
	}
}

// maxRefWords bounds reference ID words; OTP writes at most 5.
const maxRefWords = 5

// opaque validates the framing of pids, ports, references, exports and
// new funs and returns them as raw bytes; anything else is an error.
func (d *decoder) opaque(at, tag int) Term {
	switch tag {
	case TagPid, TagNewPid, TagPort, TagNewPort, TagV4Port, TagReference:
		d.node()
		d.Take("id", opaqueFixed(tag))
	case TagNewReference, TagNewerReference:
		words := int(d.U16("refLength"))
		if words > maxRefWords && !d.Failed() {
			d.FailAt(at+1, "refLength", format.ErrTooLarge)
		}
		d.node()
		creation := 1
		if tag == TagNewerReference {
			creation = 4
		}
		d.Take("creation", creation)
		d.Take("id", 4*words)
	case TagExport:
		d.node() // module and function are atoms, read like a node name
		d.node()
		if t := int(d.U8("arity")); !d.Failed() && t != TagSmallInteger {
			d.FailAt(d.Off-1, "arity", format.ErrInvalid)
		}
		d.Take("arity", 1)
	case TagNewFun:
		size := int(d.U32("funSize")) // counts itself
		if size < 4 && !d.Failed() {
			d.FailAt(at+1, "funSize", format.ErrInvalid)
		}
		d.Take("fun", size-4)
	case TagFun, TagLocal:
		d.FailAt(at, "tag", format.ErrUnsupported)
	default:
		d.FailAt(at, "tag", format.ErrInvalid)
	}
	if d.Failed() || !d.build {
		return nil
	}
	return Opaque{Tag: byte(tag), Raw: d.B[at:d.Off:d.Off]}
}

// opaqueFixed is the number of bytes after the node atom.
func opaqueFixed(tag int) int {
	switch tag {
	case TagPid:
		return 9 // ID:4, Serial:4, Creation:1
	case TagNewPid, TagV4Port:
		return 12 // ID:4, Serial:4, Creation:4 / ID:8, Creation:4
	case TagNewPort:
		return 8 // ID:4, Creation:4
	default:
		return 5 // PORT_EXT, REFERENCE_EXT: ID:4, Creation:1
	}
}

// ProperList returns the elements of [] or of a proper list (a List with
// a Nil tail); a STRING_EXT list gives its bytes as small integers, as
// the VM reads it. ok is false for an improper list or any other term.
func ProperList(t Term) (elems []Term, ok bool) {
	switch v := t.(type) {
	case Nil:
		return nil, true
	case List:
		if _, ok := v.Tail.(Nil); !ok {
			return nil, false
		}
		return v.Elems, true
	case String:
		out := make([]Term, len(v))
		for i, c := range v {
			out[i] = int64(c)
		}
		return out, true
	}
	return nil, false
}
