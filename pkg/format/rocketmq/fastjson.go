package rocketmq

import (
	"fmt"
	"strconv"
	"unicode/utf8"

	"github.com/storectl/storectl/pkg/format"
)

// The broker's config/*.json files (topics.json, consumerOffset.json,
// delayOffset.json, ...) are written by fastjson (RemotingSerializable
// .toJson, ConfigManager.persist). fastjson writes a map whose keys are
// Integers with bare numbers as keys ({0:3,1:5}), which is not JSON:
// encoding/json refuses it. JSONValue is a small parser for what fastjson
// writes (JSON plus bare number or identifier keys) that keeps the byte
// span of every value, so a repair can rewrite one number and leave every
// other byte of the file as it was.

// JSON value kinds.
const (
	JSONObject = iota + 1
	JSONArray
	JSONString
	JSONNumber
	JSONBool
	JSONNull
)

// JSONValue is one parsed value and where it sits in the input.
type JSONValue struct {
	Kind    int
	Start   int64  // offset of the value's first byte
	End     int64  // offset just past its last byte
	Str     string // JSONString: the decoded string; JSONNumber: the literal
	Members []JSONMember
	Items   []JSONValue
}

// JSONMember is one key: value pair of an object.
type JSONMember struct {
	Key      string
	KeyStart int64
	Value    JSONValue
}

// Get returns the value of the last member named key.
func (v *JSONValue) Get(key string) (*JSONValue, bool) {
	for i := len(v.Members) - 1; i >= 0; i-- {
		if v.Members[i].Key == key {
			return &v.Members[i].Value, true
		}
	}
	return nil, false
}

// Int returns a JSONNumber's value as a Java long.
func (v *JSONValue) Int() (int64, error) {
	if v.Kind != JSONNumber {
		return 0, format.Corrupt(v.Start, "number", fmt.Errorf("%w: not a number", format.ErrInvalid))
	}
	n, err := strconv.ParseInt(v.Str, 10, 64)
	if err != nil {
		return 0, format.Corrupt(v.Start, "number", fmt.Errorf("%w: %q is not a long", format.ErrInvalid, v.Str))
	}
	return n, nil
}

// maxJSONDepth bounds nesting so hostile input cannot exhaust the stack.
const maxJSONDepth = 64

// ParseFastJSON parses one fastjson document. Errors are a
// *format.CorruptError at the offending byte; trailing non-space bytes
// are an error too (a torn rewrite can leave an old tail behind).
func ParseFastJSON(b []byte) (JSONValue, error) {
	p := jsonParser{b: b}
	p.space()
	v, err := p.value(0)
	if err != nil {
		return v, err
	}
	p.space()
	if p.i != len(b) {
		return v, p.fail("trailing bytes after the document", format.ErrInvalid)
	}
	return v, nil
}

type jsonParser struct {
	b []byte
	i int
}

func (p *jsonParser) fail(what string, cause error) error {
	return format.Corrupt(int64(p.i), "json", fmt.Errorf("%w: %s", cause, what))
}

func (p *jsonParser) space() {
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

func (p *jsonParser) value(depth int) (JSONValue, error) {
	if depth > maxJSONDepth {
		return JSONValue{}, p.fail("nested too deeply", format.ErrTooLarge)
	}
	if p.i >= len(p.b) {
		return JSONValue{}, p.fail("unexpected end", format.ErrShort)
	}
	start := int64(p.i)
	switch c := p.b[p.i]; {
	case c == '{':
		return p.object(depth)
	case c == '[':
		return p.array(depth)
	case c == '"':
		s, err := p.str()
		return JSONValue{Kind: JSONString, Start: start, End: int64(p.i), Str: s}, err
	case c == '-' || c >= '0' && c <= '9':
		lit := p.number()
		if lit == "" || lit == "-" {
			return JSONValue{}, p.fail("bad number", format.ErrInvalid)
		}
		return JSONValue{Kind: JSONNumber, Start: start, End: int64(p.i), Str: lit}, nil
	default:
		word := p.word()
		switch word {
		case "true", "false":
			return JSONValue{Kind: JSONBool, Start: start, End: int64(p.i), Str: word}, nil
		case "null":
			return JSONValue{Kind: JSONNull, Start: start, End: int64(p.i)}, nil
		}
		p.i = int(start)
		return JSONValue{}, p.fail(fmt.Sprintf("unexpected byte %q", c), format.ErrInvalid)
	}
}

func (p *jsonParser) object(depth int) (JSONValue, error) {
	v := JSONValue{Kind: JSONObject, Start: int64(p.i)}
	p.i++ // {
	p.space()
	if p.i < len(p.b) && p.b[p.i] == '}' {
		p.i++
		v.End = int64(p.i)
		return v, nil
	}
	for {
		p.space()
		if p.i >= len(p.b) {
			return v, p.fail("unexpected end in an object", format.ErrShort)
		}
		m := JSONMember{KeyStart: int64(p.i)}
		var err error
		switch c := p.b[p.i]; {
		case c == '"':
			m.Key, err = p.str()
		case c == '-' || c >= '0' && c <= '9': // fastjson: Integer keys are bare
			m.Key = p.number()
		default:
			m.Key = p.word()
			if m.Key == "" {
				err = p.fail(fmt.Sprintf("unexpected byte %q for a key", c), format.ErrInvalid)
			}
		}
		if err != nil {
			return v, err
		}
		p.space()
		if p.i >= len(p.b) || p.b[p.i] != ':' {
			return v, p.fail("want ':' after a key", format.ErrInvalid)
		}
		p.i++
		p.space()
		if m.Value, err = p.value(depth + 1); err != nil {
			return v, err
		}
		v.Members = append(v.Members, m)
		p.space()
		if p.i >= len(p.b) {
			return v, p.fail("unexpected end in an object", format.ErrShort)
		}
		switch p.b[p.i] {
		case ',':
			p.i++
		case '}':
			p.i++
			v.End = int64(p.i)
			return v, nil
		default:
			return v, p.fail("want ',' or '}'", format.ErrInvalid)
		}
	}
}

func (p *jsonParser) array(depth int) (JSONValue, error) {
	v := JSONValue{Kind: JSONArray, Start: int64(p.i)}
	p.i++
	p.space()
	if p.i < len(p.b) && p.b[p.i] == ']' {
		p.i++
		v.End = int64(p.i)
		return v, nil
	}
	for {
		p.space()
		it, err := p.value(depth + 1)
		if err != nil {
			return v, err
		}
		v.Items = append(v.Items, it)
		p.space()
		if p.i >= len(p.b) {
			return v, p.fail("unexpected end in an array", format.ErrShort)
		}
		switch p.b[p.i] {
		case ',':
			p.i++
		case ']':
			p.i++
			v.End = int64(p.i)
			return v, nil
		default:
			return v, p.fail("want ',' or ']'", format.ErrInvalid)
		}
	}
}

func (p *jsonParser) number() string {
	s := p.i
	for p.i < len(p.b) {
		c := p.b[p.i]
		if c >= '0' && c <= '9' || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E' {
			p.i++
			continue
		}
		break
	}
	return string(p.b[s:p.i])
}

func (p *jsonParser) word() string {
	s := p.i
	for p.i < len(p.b) {
		c := p.b[p.i]
		if c == '_' || c == '$' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' {
			p.i++
			continue
		}
		break
	}
	return string(p.b[s:p.i])
}

// str reads a double-quoted string with JSON escapes.
func (p *jsonParser) str() (string, error) {
	p.i++ // opening quote
	var out []byte
	for p.i < len(p.b) {
		c := p.b[p.i]
		switch {
		case c == '"':
			p.i++
			return string(out), nil
		case c == '\\':
			if p.i+1 >= len(p.b) {
				return "", p.fail("unexpected end in a string", format.ErrShort)
			}
			p.i++
			switch e := p.b[p.i]; e {
			case '"', '\\', '/':
				out = append(out, e)
			case 'b':
				out = append(out, '\b')
			case 'f':
				out = append(out, '\f')
			case 'n':
				out = append(out, '\n')
			case 'r':
				out = append(out, '\r')
			case 't':
				out = append(out, '\t')
			case 'u':
				if p.i+5 > len(p.b) {
					return "", p.fail("short \\u escape", format.ErrShort)
				}
				r, err := strconv.ParseUint(string(p.b[p.i+1:p.i+5]), 16, 16)
				if err != nil {
					return "", p.fail("bad \\u escape", format.ErrInvalid)
				}
				out = utf8.AppendRune(out, rune(r))
				p.i += 4
			default:
				return "", p.fail("bad escape", format.ErrInvalid)
			}
			p.i++
		case c < 0x20:
			return "", p.fail("control byte in a string", format.ErrInvalid)
		default:
			out = append(out, c)
			p.i++
		}
	}
	return "", p.fail("unexpected end in a string", format.ErrShort)
}
