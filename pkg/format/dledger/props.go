package dledger

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/storectl/storectl/pkg/format"
)

// Keys of the properties files (DLedgerMmapFileStore, MemberState).
const (
	KeyCommittedIndex = "committedIndex" // checkpoint
	KeyEndIndex       = "endIndex"       // checkpoint
	KeyCurrTerm       = "currTerm"       // currterm
	KeyVoteLeader     = "voteLeader"     // currterm
)

// File names in dledger-<selfId>/.
const (
	CheckpointFile = "checkpoint"
	TermFile       = "currterm"
	DataDir        = "data"
	IndexDir       = "index"
)

// Property is one key=value line of a properties file.
type Property struct {
	Key, Value string
	Offset     int64 // byte offset of the line
}

// Properties is a parsed properties file in file order.
type Properties []Property

// Get returns the last value of key (java.util.Properties keeps the last).
func (p Properties) Get(key string) (string, bool) {
	for i := len(p) - 1; i >= 0; i-- {
		if p[i].Key == key {
			return p[i].Value, true
		}
	}
	return "", false
}

// Int returns key's value as DLedger reads it: Long.valueOf of the
// trimmed string. ok is false when the key is absent or empty; a value
// that is not a long is a *format.CorruptError (the real code throws).
func (p Properties) Int(key string) (v int64, ok bool, err error) {
	for i := len(p) - 1; i >= 0; i-- {
		if p[i].Key != key {
			continue
		}
		s := strings.TrimSpace(p[i].Value)
		if s == "" {
			return 0, false, nil
		}
		v, perr := strconv.ParseInt(s, 10, 64)
		if perr != nil {
			return 0, true, format.Corrupt(p[i].Offset, key, fmt.Errorf("%w: %q is not a long", format.ErrInvalid, s))
		}
		return v, true, nil
	}
	return 0, false, nil
}

// DecodeProperties parses the subset of java.util.Properties.load that
// IOUtils.properties2String writes and a person may edit: lines split at
// \n, \r or \r\n; blank lines and lines starting with # or ! skipped; the
// key ends at the first unescaped '=', ':' or white space; backslash
// escapes \t \n \r \f \uXXXX and a trailing backslash joining lines.
// Invalid UTF-8 or a bad \u escape is a *format.CorruptError.
func DecodeProperties(b []byte) (Properties, error) {
	if !utf8.Valid(b) {
		return nil, format.Corrupt(int64(firstInvalid(b)), "text", fmt.Errorf("%w: not UTF-8", format.ErrInvalid))
	}
	var out Properties
	s := string(b)
	for off := 0; off < len(s); {
		line, n := logicalLine(s[off:])
		start := off
		off += n
		line = strings.TrimLeft(line, " \t\f")
		if line == "" || line[0] == '#' || line[0] == '!' {
			continue
		}
		key, val, err := splitProperty(line)
		if err != nil {
			return nil, format.Corrupt(int64(start), "line", fmt.Errorf("%w: %v", format.ErrInvalid, err))
		}
		out = append(out, Property{Key: key, Value: val, Offset: int64(start)})
	}
	return out, nil
}

// logicalLine returns the next line of s with backslash continuations
// joined (raw: escapes kept) and how many bytes it used.
func logicalLine(s string) (string, int) {
	var sb strings.Builder
	i := 0
	for {
		j := strings.IndexAny(s[i:], "\r\n")
		if j < 0 {
			sb.WriteString(s[i:])
			return sb.String(), len(s)
		}
		seg := s[i : i+j]
		k := i + j + 1
		if s[i+j] == '\r' && k < len(s) && s[k] == '\n' {
			k++
		}
		if trailingBackslashes(seg)%2 == 1 {
			sb.WriteString(seg[:len(seg)-1])
			i = k
			for i < len(s) && (s[i] == ' ' || s[i] == '\t' || s[i] == '\f') {
				i++
			}
			continue
		}
		sb.WriteString(seg)
		return sb.String(), k
	}
}

func trailingBackslashes(s string) int {
	n := 0
	for i := len(s) - 1; i >= 0 && s[i] == '\\'; i-- {
		n++
	}
	return n
}

func splitProperty(line string) (string, string, error) {
	i := 0
	for i < len(line) {
		c := line[i]
		if c == '\\' {
			i += 2
			continue
		}
		if c == '=' || c == ':' || c == ' ' || c == '\t' || c == '\f' {
			break
		}
		i++
	}
	i = min(i, len(line))
	key := line[:i]
	rest := strings.TrimLeft(line[i:], " \t\f")
	if rest != "" && (rest[0] == '=' || rest[0] == ':') {
		rest = strings.TrimLeft(rest[1:], " \t\f")
	}
	k, err := unescape(key)
	if err != nil {
		return "", "", err
	}
	v, err := unescape(rest)
	return k, v, err
}

func unescape(s string) (string, error) {
	if !strings.Contains(s, `\`) {
		return s, nil
	}
	var sb strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' || i+1 >= len(s) {
			sb.WriteByte(s[i])
			continue
		}
		i++
		switch s[i] {
		case 't':
			sb.WriteByte('\t')
		case 'n':
			sb.WriteByte('\n')
		case 'r':
			sb.WriteByte('\r')
		case 'f':
			sb.WriteByte('\f')
		case 'u':
			if i+5 > len(s) {
				return "", fmt.Errorf("malformed \\uxxxx encoding")
			}
			r, err := strconv.ParseUint(s[i+1:i+5], 16, 16)
			if err != nil {
				return "", fmt.Errorf("malformed \\uxxxx encoding")
			}
			sb.WriteRune(rune(r))
			i += 4
		default:
			sb.WriteByte(s[i])
		}
	}
	return sb.String(), nil
}

func firstInvalid(b []byte) int {
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && n <= 1 {
			return i
		}
		i += n
	}
	return len(b)
}

// AppendProperties appends p as IOUtils.properties2String writes it:
// key=value\n per entry, no escaping.
func AppendProperties(dst []byte, p Properties) []byte {
	for _, e := range p {
		dst = append(dst, e.Key...)
		dst = append(dst, '=')
		dst = append(dst, e.Value...)
		dst = append(dst, '\n')
	}
	return dst
}

// Checkpoint is the dledger-<id>/checkpoint file.
type Checkpoint struct {
	CommittedIndex    int64 // -1 when absent or empty
	EndIndex          int64 // -1 when absent or empty
	HasCommittedIndex bool
}

// DecodeCheckpoint parses a checkpoint file.
func DecodeCheckpoint(b []byte) (Checkpoint, error) {
	cp := Checkpoint{CommittedIndex: -1, EndIndex: -1}
	p, err := DecodeProperties(b)
	if err != nil {
		return cp, err
	}
	if v, ok, err := p.Int(KeyCommittedIndex); err != nil {
		return cp, err
	} else if ok {
		cp.CommittedIndex, cp.HasCommittedIndex = v, true
	}
	if v, ok, err := p.Int(KeyEndIndex); err != nil {
		return cp, err
	} else if ok {
		cp.EndIndex = v
	}
	return cp, nil
}

// AppendCheckpoint appends cp the way persistCheckPoint writes it. Java's
// Hashtable iteration put committedIndex before endIndex in every real
// file seen (testdata/rocketmq-5x).
func AppendCheckpoint(dst []byte, cp Checkpoint) []byte {
	return AppendProperties(dst, Properties{
		{Key: KeyCommittedIndex, Value: strconv.FormatInt(cp.CommittedIndex, 10)},
		{Key: KeyEndIndex, Value: strconv.FormatInt(cp.EndIndex, 10)},
	})
}

// Term is the dledger-<id>/currterm file (MemberState.loadTerm).
type Term struct {
	CurrTerm   int64
	VoteLeader string
}

// DecodeTerm parses a currterm file.
func DecodeTerm(b []byte) (Term, error) {
	p, err := DecodeProperties(b)
	if err != nil {
		return Term{}, err
	}
	var t Term
	if v, ok, err := p.Int(KeyCurrTerm); err != nil {
		return t, err
	} else if ok {
		t.CurrTerm = v
	}
	t.VoteLeader, _ = p.Get(KeyVoteLeader)
	return t, nil
}
