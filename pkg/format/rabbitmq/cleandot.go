package rabbitmq

// clean.dot (§1.3, §1.4): Erlang terms as text, one per line, written by
// rabbit_file:write_term_file/2 with io_lib:format("~w.~n"):
//
//	{client_refs,[<<1,128,202,...>>,<<...>>]}.
//	{index_module,rabbit_msg_store_ets_index}.
//
// The parser reads exactly the subset ~w produces for such terms: tuples,
// lists, binaries (<<1,2>> and <<"text">>), atoms (bare or 'quoted'),
// integers and "strings".

import (
	"strconv"
	"strings"

	"github.com/storectl/storectl/pkg/format"
	"github.com/storectl/storectl/pkg/format/etf"
)

// CleanDot is the content of a clean.dot file.
type CleanDot struct {
	ClientRefs  [][16]byte // client_refs: one 16-byte ref per queue with a persistent store client
	IndexModule string     // index_module, "" when absent (4.0+ may omit it)
	Terms       []etf.Term // every term in file order
}

// EncodeCleanDot writes cd's client_refs and, when set, its index_module
// the way the broker does (io_lib:format("~w.~n"), §1.3): refs as
// <<b1,...,b16>>, the module as a bare atom. Other Terms are not written.
// ParseCleanDot of a broker's file and EncodeCleanDot give the file back
// byte for byte (TestCleanDotFixtures).
func EncodeCleanDot(cd CleanDot) []byte {
	var s strings.Builder
	s.WriteString("{client_refs,[")
	for i, r := range cd.ClientRefs {
		if i > 0 {
			s.WriteByte(',')
		}
		s.WriteString("<<")
		for j, c := range r {
			if j > 0 {
				s.WriteByte(',')
			}
			s.WriteString(strconv.Itoa(int(c)))
		}
		s.WriteString(">>")
	}
	s.WriteString("]}.\n")
	if cd.IndexModule != "" {
		s.WriteString("{index_module," + cd.IndexModule + "}.\n")
	}
	return []byte(s.String())
}

// ParseCleanDot parses clean.dot. Unknown keys are kept in Terms only.
func ParseCleanDot(b []byte) (CleanDot, error) {
	var cd CleanDot
	p := cleanParser{b: b}
	for {
		p.space()
		if p.pos == len(b) {
			break
		}
		at := p.pos
		t := p.term(0)
		p.space()
		p.expect('.')
		if p.err != nil {
			return cd, p.err
		}
		cd.Terms = append(cd.Terms, t)
		kv, ok := t.(etf.Tuple)
		if !ok || len(kv) != 2 {
			continue
		}
		switch kv[0] {
		case etf.Atom("client_refs"):
			elems, ok := etf.ProperList(kv[1])
			if !ok {
				return cd, format.Corrupt(int64(at), "client_refs", format.ErrInvalid)
			}
			for _, e := range elems {
				ref, ok := e.(etf.Binary)
				if !ok || len(ref) != 16 {
					return cd, format.Corrupt(int64(at), "client_refs", format.ErrInvalid)
				}
				cd.ClientRefs = append(cd.ClientRefs, [16]byte(ref))
			}
		case etf.Atom("index_module"):
			m, ok := kv[1].(etf.Atom)
			if !ok {
				return cd, format.Corrupt(int64(at), "index_module", format.ErrInvalid)
			}
			cd.IndexModule = string(m)
		}
	}
	return cd, nil
}

// cleanParser is a recursive-descent parser over b; the first error sticks.
type cleanParser struct {
	b   []byte
	pos int
	err error
}

func (p *cleanParser) fail(field string, err error) {
	if p.err == nil {
		p.err = format.Corrupt(int64(p.pos), field, err)
	}
}

func (p *cleanParser) space() {
	for p.pos < len(p.b) {
		switch p.b[p.pos] {
		case ' ', '\t', '\r', '\n':
			p.pos++
		case '%': // comment to end of line
			for p.pos < len(p.b) && p.b[p.pos] != '\n' {
				p.pos++
			}
		default:
			return
		}
	}
}

func (p *cleanParser) peek() byte {
	if p.pos < len(p.b) {
		return p.b[p.pos]
	}
	return 0
}

func (p *cleanParser) expect(c byte) {
	if p.err != nil {
		return
	}
	if p.peek() != c {
		if p.pos == len(p.b) {
			p.fail("term", format.ErrShort)
		} else {
			p.fail("term", format.ErrInvalid)
		}
		return
	}
	p.pos++
}

// term parses one term; depth bounds nesting like MaxTermDepth for ETF.
func (p *cleanParser) term(depth int) etf.Term {
	p.space()
	if p.err != nil {
		return nil
	}
	if depth > etf.MaxTermDepth {
		p.fail("depth", format.ErrTooLarge)
		return nil
	}
	c := p.peek()
	switch {
	case c == '{':
		p.pos++
		return etf.Tuple(p.seq('}', depth))
	case c == '[':
		p.pos++
		elems := p.seq(']', depth)
		if len(elems) == 0 {
			return etf.Nil{}
		}
		return etf.List{Elems: elems, Tail: etf.Nil{}}
	case c == '<' && p.pos+1 < len(p.b) && p.b[p.pos+1] == '<':
		p.pos += 2
		return p.binary()
	case c == '"':
		return etf.String(p.quoted('"'))
	case c == '\'':
		return etf.Atom(p.quoted('\''))
	case c == '-' || (c >= '0' && c <= '9'):
		return p.integer()
	case c >= 'a' && c <= 'z':
		start := p.pos
		for p.pos < len(p.b) && cleanAtomChar(p.b[p.pos]) {
			p.pos++
		}
		return etf.Atom(p.b[start:p.pos])
	case p.pos == len(p.b):
		p.fail("term", format.ErrShort)
	default:
		p.fail("term", format.ErrInvalid)
	}
	return nil
}

func cleanAtomChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '@'
}

// seq parses comma-separated terms up to the closing byte.
func (p *cleanParser) seq(end byte, depth int) []etf.Term {
	var out []etf.Term
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
		p.expect(end)
		break
	}
	return out
}

// binary parses the rest of <<...>>: byte integers or one "string".
func (p *cleanParser) binary() etf.Term {
	var out etf.Binary = []byte{}
	p.space()
	for p.err == nil && p.peek() != '>' {
		if p.peek() == '"' {
			out = append(out, p.quoted('"')...)
		} else {
			at := p.pos
			v, ok := p.integer().(int64)
			if p.err == nil && (!ok || v < 0 || v > 255) {
				p.pos = at
				p.fail("binary", format.ErrInvalid)
			}
			out = append(out, byte(v))
		}
		p.space()
		if p.peek() == ',' {
			p.pos++
			p.space()
		}
	}
	p.expect('>')
	p.expect('>')
	return out
}

func (p *cleanParser) integer() etf.Term {
	start := p.pos
	if p.peek() == '-' {
		p.pos++
	}
	for p.pos < len(p.b) && p.b[p.pos] >= '0' && p.b[p.pos] <= '9' {
		p.pos++
	}
	v, err := strconv.ParseInt(string(p.b[start:p.pos]), 10, 64)
	if err != nil {
		p.pos = start
		p.fail("integer", format.ErrInvalid)
		return nil
	}
	return v
}

// quoted reads a '...' or "..." token with backslash escapes of the quote
// and backslash (all that ~w emits for these files).
func (p *cleanParser) quoted(q byte) []byte {
	p.pos++
	var out []byte
	for p.pos < len(p.b) {
		c := p.b[p.pos]
		p.pos++
		switch {
		case c == q:
			return out
		case c == '\\' && p.pos < len(p.b):
			out = append(out, p.b[p.pos])
			p.pos++
		default:
			out = append(out, c)
		}
	}
	p.fail("term", format.ErrShort)
	return nil
}
