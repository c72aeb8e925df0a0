package report

// A reflection-free encoder for findings. encoding/json re-scans (and
// compacts) whatever a json.Marshaler returns, which made a generation-1
// hazard with thousands of victims cost more to print than to find. The
// output is byte-for-byte what the jsonl emitter's json.Encoder gives (no
// HTML escaping); finding_json_test.go checks that on every fixture's
// findings and on hostile strings.

import (
	"bytes"
	"encoding/json"
	"maps"
	"slices"
	"strconv"
	"unicode/utf8"

	"github.com/storectl/storectl/pkg/scan"
)

// JSONAppender is a detail value that appends its own compact JSON
// encoding (exactly what encoding/json would give for it). It may fail
// (a value read back from a temp file).
type JSONAppender interface {
	AppendJSON(b []byte) ([]byte, error)
}

// findingEncoder appends findings; enc/buf encode the values it has no
// fast path for, with the emitter's settings, and every other line of
// the jsonl emitter (marshal).
type findingEncoder struct {
	buf bytes.Buffer
	enc *json.Encoder
}

func newFindingEncoder() *findingEncoder {
	fe := &findingEncoder{}
	fe.enc = json.NewEncoder(&fe.buf)
	fe.enc.SetEscapeHTML(false)
	return fe
}

// marshal returns v's encoding/json encoding without HTML escaping,
// ending in a newline; it is valid until the next marshal or value.
func (fe *findingEncoder) marshal(v any) ([]byte, error) {
	fe.buf.Reset()
	if err := fe.enc.Encode(v); err != nil {
		return nil, err
	}
	return fe.buf.Bytes(), nil
}

// value appends v's JSON encoding.
func (fe *findingEncoder) value(b []byte, v any) ([]byte, error) {
	switch x := v.(type) {
	case JSONAppender:
		return x.AppendJSON(b)
	case string:
		return appendJSONString(b, x), nil
	case int:
		return strconv.AppendInt(b, int64(x), 10), nil
	case int64:
		return strconv.AppendInt(b, x, 10), nil
	case bool:
		return strconv.AppendBool(b, x), nil
	}
	enc, err := fe.marshal(v)
	if err != nil {
		return b, err
	}
	return append(b, bytes.TrimSuffix(enc, []byte("\n"))...), nil
}

// appendFinding appends f as the JSON object encoding/json gives for it.
func (fe *findingEncoder) appendFinding(b []byte, f *scan.Finding) ([]byte, error) {
	b, err := fe.appendFindingFields(append(b, '{'), f)
	return append(b, '}'), err
}

// appendFindingFields appends f's members, without the braces.
func (fe *findingEncoder) appendFindingFields(b []byte, f *scan.Finding) ([]byte, error) {
	b = append(b, `"code":`...)
	b = appendJSONString(b, f.Code)
	b = append(b, `,"severity":`...)
	b = appendJSONString(b, f.Severity.String())
	b = append(b, `,"path":`...)
	b = appendJSONString(b, f.Path)
	b = append(b, `,"offset":`...)
	b = strconv.AppendInt(b, f.Offset, 10)
	b = append(b, `,"length":`...)
	b = strconv.AppendInt(b, f.Length, 10)
	if f.Expected != "" {
		b = append(b, `,"expected":`...)
		b = appendJSONString(b, f.Expected)
	}
	if f.Actual != "" {
		b = append(b, `,"actual":`...)
		b = appendJSONString(b, f.Actual)
	}
	if len(f.Evidence) > 0 {
		b, _ = appendObject(append(b, `,"evidence":`...), f.Evidence, func(b []byte, v string) ([]byte, error) {
			return appendJSONString(b, v), nil
		})
	}
	b = append(b, `,"repair":`...)
	b = appendJSONString(b, f.Repair)
	b = append(b, `,"message":`...)
	b = appendJSONString(b, f.Message)
	if f.MsgID != "" {
		b = append(b, `,"msg_id":`...)
		b = appendJSONString(b, f.MsgID)
	}
	if f.Key != "" {
		b = append(b, `,"key":`...)
		b = appendJSONString(b, f.Key)
	}
	if f.Baseline != "" {
		b = append(b, `,"baseline":`...)
		b = appendJSONString(b, f.Baseline)
	}
	if len(f.Details) > 0 {
		var err error
		if b, err = appendObject(append(b, `,"details":`...), f.Details, fe.value); err != nil {
			return b, err
		}
	}
	if f.Root != "" {
		b = append(b, `,"root":`...)
		b = appendJSONString(b, f.Root)
	}
	return b, nil
}

// appendObject appends m as a JSON object with its keys sorted, as
// encoding/json does, each value through value.
func appendObject[V any](b []byte, m map[string]V, value func([]byte, V) ([]byte, error)) ([]byte, error) {
	b = append(b, '{')
	for i, k := range slices.Sorted(maps.Keys(m)) {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(appendJSONString(b, k), ':')
		var err error
		if b, err = value(b, m[k]); err != nil {
			return b, err
		}
	}
	return append(b, '}'), nil
}

// appendJSONString appends s quoted as encoding/json does with HTML
// escaping off: ", \ and control characters escaped (\n, \r, \t, \b, \f and
// \u00XX for the rest), invalid UTF-8 as \ufffd, U+2028 and U+2029 as
// \u2028 and \u2029.
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
