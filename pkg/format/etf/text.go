package etf

// Erlang terms as text, the way io_lib:format("~p.") and "~w." print them
// (file:consult syntax): ra writes a replica's config file this way.
//
//	atoms     abc, 'Quoted atom', rmq@host
//	numbers   12, -7, 16#ff, 1.5e3, $a (a character)
//	strings   "text" (a list of code points; adjacent strings join)
//	binaries  <<1,2,3>>, <<"text">>, <<"text"/utf8>>
//	tuples    {a,b}   lists [a,b], [a|b]   maps #{k => v}
//	pids, refs, ports and funs (<0.12.0>, #Ref<...>, #Port<...>, #Fun<...>)
//	          become Opaque with Tag 0 and their text as Raw.

import (
	"math/big"
	"strconv"
	"unicode/utf8"

	"github.com/storectl/storectl/pkg/format"
)

// ParseText parses every term of b, each ended by a full stop.
// Errors are *format.CorruptError with the byte offset in b.
func ParseText(b []byte) ([]Term, error) {
	p := textParser{b: b}
	var out []Term
	for {
		p.space()
		if p.pos >= len(b) || p.err != nil {
			break
		}
		t := p.term(0)
		p.space()
		p.expect('.', "stop")
		if p.err != nil {
			break
		}
		out = append(out, t)
	}
	if p.err != nil {
		return out, p.err
	}
	return out, nil
}

type textParser struct {
	b   []byte
	pos int
	err error
}

func (p *textParser) fail(field string, err error) {
	if p.err == nil {
		if p.pos >= len(p.b) && err == format.ErrInvalid {
			err = format.ErrShort
		}
		p.err = format.Corrupt(int64(p.pos), field, err)
	}
}

func (p *textParser) peek() byte {
	if p.pos < len(p.b) {
		return p.b[p.pos]
	}
	return 0
}

func (p *textParser) space() {
	for p.pos < len(p.b) {
		switch p.b[p.pos] {
		case ' ', '\t', '\r', '\n', '\f', '\v':
			p.pos++
		case '%':
			for p.pos < len(p.b) && p.b[p.pos] != '\n' {
				p.pos++
			}
		default:
			return
		}
	}
}

func (p *textParser) expect(c byte, field string) {
	if p.err != nil {
		return
	}
	if p.peek() != c {
		p.fail(field, format.ErrInvalid)
		return
	}
	p.pos++
}

func (p *textParser) term(depth int) Term {
	p.space()
	if p.err != nil {
		return nil
	}
	if depth > MaxTermDepth {
		p.fail("depth", format.ErrTooLarge)
		return nil
	}
	c := p.peek()
	switch {
	case c == '{':
		p.pos++
		return Tuple(p.seq('}', depth))
	case c == '[':
		p.pos++
		return p.list(depth)
	case c == '#' && p.pos+1 < len(p.b) && p.b[p.pos+1] == '{':
		p.pos += 2
		return p.mapTerm(depth)
	case c == '#':
		return p.opaque()
	case c == '<' && p.pos+1 < len(p.b) && p.b[p.pos+1] == '<':
		p.pos += 2
		return p.binary()
	case c == '<':
		return p.opaque()
	case c == '"':
		return p.stringTerm()
	case c == '\'':
		s := p.quoted('\'')
		if p.err == nil && utf8.RuneCountInString(s) > maxAtomChars {
			p.fail("atom", format.ErrTooLarge)
		}
		return Atom(s)
	case c == '$':
		p.pos++
		r := p.char()
		return int64(r)
	case c == '-' || c == '+' || (c >= '0' && c <= '9'):
		return p.number()
	case c >= 'a' && c <= 'z':
		start := p.pos
		for p.pos < len(p.b) && atomChar(p.b[p.pos]) {
			p.pos++
		}
		if p.pos-start > maxAtomChars {
			p.fail("atom", format.ErrTooLarge)
		}
		return Atom(p.b[start:p.pos])
	}
	p.fail("term", format.ErrInvalid)
	return nil
}

func atomChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '@'
}

// seq parses terms separated by commas up to end.
func (p *textParser) seq(end byte, depth int) []Term {
	out := []Term{}
	p.space()
	if p.peek() == end {
		p.pos++
		return out
	}
	for p.err == nil {
		out = append(out, p.term(depth+1))
		p.space()
		if p.peek() == ',' {
			p.pos++
			continue
		}
		p.expect(end, "term")
		break
	}
	return out
}

func (p *textParser) list(depth int) Term {
	var elems []Term
	var tail Term = Nil{}
	p.space()
	if p.peek() == ']' {
		p.pos++
		return Nil{}
	}
	for p.err == nil {
		elems = append(elems, p.term(depth+1))
		p.space()
		switch p.peek() {
		case ',':
			p.pos++
			continue
		case '|':
			p.pos++
			tail = p.term(depth + 1)
			p.space()
		}
		p.expect(']', "list")
		break
	}
	return List{Elems: elems, Tail: tail}
}

func (p *textParser) mapTerm(depth int) Term {
	m := Map{}
	p.space()
	if p.peek() == '}' {
		p.pos++
		return m
	}
	for p.err == nil {
		k := p.term(depth + 1)
		p.space()
		if p.peek() == '=' && p.pos+1 < len(p.b) && p.b[p.pos+1] == '>' {
			p.pos += 2
		} else {
			p.fail("map", format.ErrInvalid)
			break
		}
		v := p.term(depth + 1)
		m = append(m, MapEntry{Key: k, Value: v})
		p.space()
		if p.peek() == ',' {
			p.pos++
			continue
		}
		p.expect('}', "map")
		break
	}
	return m
}

// opaque takes <...> or #Name<...> as text.
func (p *textParser) opaque() Term {
	start := p.pos
	for p.pos < len(p.b) && p.b[p.pos] != '<' {
		p.pos++
	}
	level := 0
	for p.pos < len(p.b) {
		switch p.b[p.pos] {
		case '<':
			level++
		case '>':
			level--
		}
		p.pos++
		if level == 0 {
			return Opaque{Tag: 0, Raw: p.b[start:p.pos:p.pos]}
		}
	}
	p.fail("term", format.ErrShort)
	return nil
}

// binary parses the rest of <<...>>: segments of byte values and strings,
// a string optionally with /utf8 (or /binary for a nested binary).
func (p *textParser) binary() Term {
	out := Binary{}
	p.space()
	if p.peek() == '>' {
		p.expect('>', "binary")
		p.expect('>', "binary")
		return out
	}
	for p.err == nil {
		p.space()
		if p.peek() == '"' {
			s := p.strings()
			p.space()
			if p.peek() == '/' {
				p.pos++
				start := p.pos
				for p.pos < len(p.b) && atomChar(p.b[p.pos]) {
					p.pos++
				}
				if string(p.b[start:p.pos]) != "utf8" {
					p.fail("binary", format.ErrUnsupported)
					return nil
				}
				for _, r := range s {
					out = utf8.AppendRune(out, r)
				}
			} else {
				for _, r := range s {
					if r > 255 {
						p.fail("binary", format.ErrInvalid)
						return nil
					}
					out = append(out, byte(r))
				}
			}
		} else {
			v, ok := p.number().(int64)
			if p.err == nil && (!ok || v < 0 || v > 255) {
				p.fail("binary", format.ErrInvalid)
			}
			out = append(out, byte(v))
		}
		p.space()
		if p.peek() == ',' {
			p.pos++
			continue
		}
		p.expect('>', "binary")
		p.expect('>', "binary")
		break
	}
	return out
}

// stringTerm is a string literal (adjacent ones joined) as a String when
// every code point is a byte, else as a List of integers.
func (p *textParser) stringTerm() Term {
	rs := p.strings()
	if p.err != nil {
		return nil
	}
	if len(rs) == 0 {
		return Nil{}
	}
	bs := make([]byte, 0, len(rs))
	for _, r := range rs {
		if r > 255 {
			l := List{Tail: Nil{}}
			for _, r := range rs {
				l.Elems = append(l.Elems, int64(r))
			}
			return l
		}
		bs = append(bs, byte(r))
	}
	return String(bs)
}

// strings reads one or more adjacent "..." literals.
func (p *textParser) strings() []rune {
	var out []rune
	for p.err == nil {
		s := p.quoted('"')
		out = append(out, []rune(s)...)
		save := p.pos
		p.space()
		if p.peek() != '"' {
			p.pos = save
			break
		}
	}
	return out
}

// quoted reads a '...' or "..." token with Erlang escapes, as UTF-8.
func (p *textParser) quoted(q byte) string {
	p.pos++
	var out []byte
	for p.err == nil {
		if p.pos >= len(p.b) {
			p.fail("string", format.ErrShort)
			return ""
		}
		c := p.b[p.pos]
		if c == q {
			p.pos++
			return string(out)
		}
		out = utf8.AppendRune(out, p.char())
	}
	return ""
}

// char reads one possibly escaped character.
func (p *textParser) char() rune {
	if p.pos >= len(p.b) {
		p.fail("char", format.ErrShort)
		return 0
	}
	c := p.b[p.pos]
	if c != '\\' {
		r, n := utf8.DecodeRune(p.b[p.pos:])
		if r == utf8.RuneError && n <= 1 {
			// Latin-1 text: the byte is the code point
			r, n = rune(c), 1
		}
		p.pos += n
		return r
	}
	p.pos++
	if p.pos >= len(p.b) {
		p.fail("char", format.ErrShort)
		return 0
	}
	c = p.b[p.pos]
	p.pos++
	switch c {
	case 'b':
		return '\b'
	case 'd':
		return 127
	case 'e':
		return 27
	case 'f':
		return '\f'
	case 'n':
		return '\n'
	case 'r':
		return '\r'
	case 's':
		return ' '
	case 't':
		return '\t'
	case 'v':
		return '\v'
	case '^':
		if p.pos >= len(p.b) {
			p.fail("char", format.ErrShort)
			return 0
		}
		c = p.b[p.pos]
		p.pos++
		return rune(c & 31)
	case 'x':
		if p.peek() == '{' {
			p.pos++
			start := p.pos
			for p.pos < len(p.b) && p.b[p.pos] != '}' {
				p.pos++
			}
			v, err := strconv.ParseUint(string(p.b[start:p.pos]), 16, 32)
			p.expect('}', "char")
			if err != nil || v > utf8.MaxRune {
				p.fail("char", format.ErrInvalid)
			}
			return rune(v)
		}
		start := p.pos
		for p.pos < len(p.b) && p.pos-start < 2 && isHex(p.b[p.pos]) {
			p.pos++
		}
		v, err := strconv.ParseUint(string(p.b[start:p.pos]), 16, 8)
		if err != nil {
			p.fail("char", format.ErrInvalid)
		}
		return rune(v)
	}
	if c >= '0' && c <= '7' {
		v := rune(c - '0')
		for i := 0; i < 2 && p.pos < len(p.b) && p.b[p.pos] >= '0' && p.b[p.pos] <= '7'; i++ {
			v = v*8 + rune(p.b[p.pos]-'0')
			p.pos++
		}
		return v
	}
	return rune(c)
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

// number parses an integer (decimal or Base#digits, any size) or a float.
func (p *textParser) number() Term {
	start := p.pos
	if c := p.peek(); c == '-' || c == '+' {
		p.pos++
	}
	for p.pos < len(p.b) && (p.b[p.pos] >= '0' && p.b[p.pos] <= '9' || p.b[p.pos] == '_') {
		p.pos++
	}
	digits := string(p.b[start:p.pos])
	neg := len(digits) > 0 && digits[0] == '-'
	if len(digits) > 0 && (digits[0] == '-' || digits[0] == '+') {
		digits = digits[1:]
	}
	switch {
	case p.peek() == '#':
		base, err := strconv.Atoi(digits)
		if err != nil || base < 2 || base > 36 {
			p.fail("integer", format.ErrInvalid)
			return nil
		}
		p.pos++
		ds := p.pos
		for p.pos < len(p.b) && (isBaseDigit(p.b[p.pos]) || p.b[p.pos] == '_') {
			p.pos++
		}
		return p.bigOrInt(string(p.b[ds:p.pos]), base, neg)
	case p.peek() == '.' && p.pos+1 < len(p.b) && p.b[p.pos+1] >= '0' && p.b[p.pos+1] <= '9':
		p.pos++
		for p.pos < len(p.b) && (p.b[p.pos] >= '0' && p.b[p.pos] <= '9' || p.b[p.pos] == '_') {
			p.pos++
		}
		if c := p.peek(); c == 'e' || c == 'E' {
			p.pos++
			if c := p.peek(); c == '-' || c == '+' {
				p.pos++
			}
			for p.pos < len(p.b) && p.b[p.pos] >= '0' && p.b[p.pos] <= '9' {
				p.pos++
			}
		}
		f, err := strconv.ParseFloat(string(p.b[start:p.pos]), 64)
		if err != nil {
			p.fail("float", format.ErrInvalid)
			return nil
		}
		return f
	}
	return p.bigOrInt(digits, 10, neg)
}

func isBaseDigit(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

func (p *textParser) bigOrInt(digits string, base int, neg bool) Term {
	clean := make([]byte, 0, len(digits))
	for i := 0; i < len(digits); i++ {
		if digits[i] != '_' {
			clean = append(clean, digits[i])
		}
	}
	if len(clean) == 0 || len(clean) > 4096 {
		p.fail("integer", format.ErrInvalid)
		return nil
	}
	v, ok := new(big.Int).SetString(string(clean), base)
	if !ok {
		p.fail("integer", format.ErrInvalid)
		return nil
	}
	if neg {
		v.Neg(v)
	}
	if v.IsInt64() {
		return v.Int64()
	}
	return v
}
