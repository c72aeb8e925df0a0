package rocketmq

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
	"unicode/utf16"

	"github.com/storectl/storectl/pkg/format"
)

// workedExample is the record of docs/formats/rocketmq.md §2.7, typed in from
// the spec's hex dump (an external oracle, not produced by our encoder).
func workedExample(t testing.TB) []byte {
	dump := `00 00 00 80 da a3 20 a7 77 d1 89 82 00 00 00 00
00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00
00 00 00 00 00 00 00 00 00 00 01 8b cf e5 68 00
7f 00 00 01 00 00 c3 50 00 00 01 8b cf e5 68 7b
c0 a8 00 0a 00 00 2a 9f 00 00 00 00 00 00 00 00
00 00 00 00 00 00 00 05 48 65 6c 6c 6f 09 54 6f
70 69 63 54 65 73 74 00 17 54 41 47 53 01 54 61
67 41 02 4b 45 59 53 01 6f 72 64 65 72 2d 31 02`
	b, err := hex.DecodeString(strings.Join(strings.Fields(dump), ""))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestWorkedExample(t *testing.T) {
	m, err := DecodeMessage(workedExample(t), 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Verify(); err != nil {
		t.Fatal(err)
	}
	if m.TotalSize != 128 || m.BodyCRC != 2010220930 || string(m.Body) != "Hello" || string(m.Topic) != "TopicTest" ||
		m.BornTimestamp != 1700000000000 || m.StoreTimestamp != 1700000000123 ||
		m.BornHost.String() != "127.0.0.1:50000" || m.StoreHost.String() != "192.168.0.10:10911" {
		t.Fatalf("decoded %+v", m)
	}
	if m.TagsCode() != 2598919 || m.Keys() != "order-1" || m.Tags() != "TagA" {
		t.Fatalf("tagsCode %d keys %q", m.TagsCode(), m.Keys())
	}
	if h := JavaHashCode([]byte("TopicTest#order-1")); h != -1829193424 {
		t.Fatalf("hashCode = %d", h)
	}
	if h := IndexKeyHash([]byte("TopicTest#order-1")); h != 1829193424 || h%5000000 != 4193424 {
		t.Fatalf("index hash = %d", h)
	}
	if id := m.MsgID(); id != "C0A8000A00002A9F0000000000000000" {
		t.Fatalf("msg id %s", id)
	}
}

func TestJavaHashCodeUTF16(t *testing.T) {
	// "😀" is one rune but two UTF-16 code units: 0xD83D, 0xDE00.
	if got, want := JavaHashCode([]byte("😀")), int32(0xD83D*31+0xDE00); got != want {
		t.Fatalf("got %d want %d", got, want)
	}
	// Integer.MIN_VALUE maps to 0 in the index: "polygenelubricants".hashCode() == MIN_VALUE.
	if JavaHashCode([]byte("polygenelubricants")) != -1<<31 || IndexKeyHash([]byte("polygenelubricants")) != 0 {
		t.Fatal("MIN_VALUE rule")
	}
}

func TestDecodeMessageTable(t *testing.T) {
	const base = 0x1000
	tests := []struct {
		name      string
		mutate    func([]byte) []byte
		wantField string
		wantErr   error
	}{
		{name: "valid"},
		{name: "truncated header", mutate: func(b []byte) []byte { return b[:3] }, wantField: "totalSize", wantErr: format.ErrShort},
		{name: "bad magic", mutate: func(b []byte) []byte { b[4] ^= 0xff; return b }, wantField: "magic", wantErr: format.ErrMagic},
		{name: "zero header", mutate: func(b []byte) []byte { clear(b[:8]); return b }, wantField: "magic", wantErr: format.ErrMagic},
		{name: "huge totalSize", mutate: func(b []byte) []byte { binary.BigEndian.PutUint32(b, 1<<30); return b }, wantField: "totalSize", wantErr: format.ErrTooLarge},
		{name: "negative totalSize", mutate: func(b []byte) []byte { binary.BigEndian.PutUint32(b, 0x80000000); return b }, wantField: "totalSize", wantErr: format.ErrInvalid},
		{name: "totalSize past end", mutate: func(b []byte) []byte { return b[:100] }, wantField: "totalSize", wantErr: format.ErrShort},
		{name: "negative body length", mutate: func(b []byte) []byte { binary.BigEndian.PutUint32(b[84:], 0xFFFFFFFF); return b }, wantField: "bodyLength", wantErr: format.ErrInvalid},
		{name: "body length past record", mutate: func(b []byte) []byte { binary.BigEndian.PutUint32(b[84:], 1000); return b }, wantField: "body", wantErr: format.ErrShort},
		{name: "V1 topic length 0x89 is negative", mutate: func(b []byte) []byte { b[93] = 0x89; return b }, wantField: "topicLength", wantErr: format.ErrInvalid},
		{name: "negative properties length", mutate: func(b []byte) []byte { b[103] = 0x80; return b }, wantField: "propertiesLength", wantErr: format.ErrInvalid},
		{name: "calMsgLength mismatch", mutate: func(b []byte) []byte { binary.BigEndian.PutUint32(b, 127); return b[:127] }, wantField: "properties", wantErr: format.ErrShort},
		{name: "trailing bytes in record", mutate: func(b []byte) []byte {
			b = append(b, 0)
			binary.BigEndian.PutUint32(b, 129)
			return b
		}, wantField: "totalSize", wantErr: format.ErrInvalid},
		{name: "IPv6 store host flag without room", mutate: func(b []byte) []byte { b[39] |= 0x20; return b }, wantField: "body", wantErr: format.ErrShort},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := workedExample(t)
			if tt.mutate != nil {
				b = tt.mutate(b)
			}
			m, err := DecodeMessage(b, base, 0)
			if tt.wantErr == nil {
				if err != nil || m.TotalSize != 128 {
					t.Fatalf("err = %v", err)
				}
				return
			}
			var ce *format.CorruptError
			if !errors.As(err, &ce) || !errors.Is(err, tt.wantErr) || ce.Field != tt.wantField || ce.Offset < base {
				t.Fatalf("err = %#v (%v), want field %s cause %v", err, err, tt.wantField, tt.wantErr)
			}
		})
	}
}

func TestVerifyChecksums(t *testing.T) {
	b := workedExample(t)
	b[0x58] ^= 1 // a body byte
	m, err := DecodeMessage(b, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var ce *format.CorruptError
	if err := m.Verify(); !errors.As(err, &ce) || ce.Field != "bodyCRC" || !errors.Is(err, format.ErrChecksum) || ce.Offset != 8 {
		t.Fatalf("Verify = %v", err)
	}
}

func TestBlank(t *testing.T) {
	b := []byte{0, 0, 0x03, 0x61, 0xcb, 0xd4, 0x31, 0x94}
	m, err := DecodeMessage(b, 0, 0)
	if err != nil || !m.IsBlank() || m.TotalSize != 865 {
		t.Fatalf("blank: %+v %v", m, err)
	}
}

func TestSysFlagHelpers(t *testing.T) {
	m := Message{SysFlag: 0x1 | 0x2 | 0xC | 0x80 | 0x200}
	if !m.Compressed() || !m.MultiTags() || m.TransactionType() != TxRollback || !m.InnerBatch() ||
		m.CompressionType() != CompressionZSTD || m.Dispatched() || m.BornHostV6() || m.StoreHostV6() || m.NeedUnwrap() {
		t.Fatalf("helpers wrong for %#x", m.SysFlag)
	}
	m.SysFlag = TxCommit | FlagBornHostV6 | FlagStoreHostV6 | FlagNeedUnwrap
	if !m.Dispatched() || !m.BornHostV6() || !m.StoreHostV6() || !m.NeedUnwrap() || m.InnerNum() != 1 {
		t.Fatal("helpers wrong")
	}
}

func TestParseProperties(t *testing.T) {
	raw := []byte("a\x011\x02\x01x\x02b\x01\x02c\x01\x013\x02a\x012\x02noval\x02d\x01v\x01w")
	got := ParseProperties(raw)
	// Java: "\x01x" (empty key), "b\x01" (empty value) and "noval" are
	// dropped; "c\x01\x013" keeps value "\x013"; last "a" wins.
	want := map[string]string{"a": "2", "c": "\x013", "d": "v\x01w"}
	if len(got) != len(want) {
		t.Fatalf("got %q", got)
	}
	for k, v := range want {
		if got[k] != v {
			t.Fatalf("%s: got %q want %q", k, got[k], v)
		}
		if lv, ok := LookupProperty(raw, k); !ok || string(lv) != v {
			t.Fatalf("lookup %s = %q", k, lv)
		}
	}
}

func TestFileNames(t *testing.T) {
	if FormatFileName(1073741824) != "00000000001073741824" {
		t.Fatal(FormatFileName(1073741824))
	}
	for _, bad := range []string{"", "123", "0000000000000000000x", "99999999999999999999", "000000000000000000000"} {
		if _, err := ParseFileName(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	if v, err := ParseFileName("09223372036854775807"); err != nil || v != 1<<63-1 {
		t.Fatalf("max: %d %v", v, err)
	}
}

// TestJavaHashCodeMatchesRangeDecoding: the byte-wise decoder agrees with
// ranging over the string (Go's UTF-8 decoding, U+FFFD per invalid byte)
// on ASCII, multi-byte, astral and invalid input.
func TestJavaHashCodeMatchesRangeDecoding(t *testing.T) {
	ref := javaHashRef
	for _, s := range []string{"", "TopicTest#order-1", "héllo wörld", "😀x😀", "\xff\xfe\x80abc", "a\xe2\x82", "\xed\xa0\x80", strings.Repeat("k", 200)} {
		if got, want := JavaHashCode([]byte(s)), ref([]byte(s)); got != want {
			t.Errorf("%q: %d, want %d", s, got, want)
		}
		// A prefix ending in ASCII, hashed once, continued over the key.
		for _, topic := range []string{"TopicA", "TöpicB", "\xe2\x82"} {
			key := []byte(topic + "#" + s)
			if got, want := IndexHashOf(JavaHashCodeFrom(JavaHashCode([]byte(topic+"#")), []byte(s))), IndexKeyHash(key); got != want {
				t.Errorf("%q: prefix-continued %d, want %d", key, got, want)
			}
		}
	}
}

// TestPropCRCFastPath: the '#'-first search finds the __CRC32# property
// wherever it sits, also behind other '#' bytes, and nothing without it
// (reference: a plain split of the property text).
func TestPropCRCFastPath(t *testing.T) {
	kv := func(k, v string) string { return k + "\x01" + v + "\x02" }
	for _, props := range []string{
		"",
		kv("KEYS", "a#b"),
		kv("KEYS", "a#b") + kv(PropCRC32, "123"),
		kv(PropCRC32, "1") + kv("TAGS", "x"),
		kv("#", "#") + kv("_"+PropCRC32, "9"),
		kv("KEYS", "x__CRC32") + kv("A", "#"),
		"##__CRC32#\x011\x02",
	} {
		want := false
		for _, f := range strings.Split(props, "\x02") {
			if k, _, ok := strings.Cut(f, "\x01"); ok && k == PropCRC32 {
				want = true
			}
		}
		m := Message{Properties: []byte(props)}
		if got := m.PropCRC().Present; got != want {
			t.Errorf("%q: Present %v, want %v", props, got, want)
		}
	}
}

// javaHashRef is String.hashCode over the UTF-16 units of Go's decoding
// of b (ranging over the string: U+FFFD per invalid byte).
func javaHashRef(b []byte) int32 {
	var h int32
	for _, r := range string(b) {
		for _, u := range utf16.Encode([]rune{r}) {
			h = 31*h + int32(u)
		}
	}
	return h
}

// FuzzJavaHashCode: JavaHashCode equals the reference on any bytes, and
// continuing it after a prefix ending in '#' equals hashing the whole.
func FuzzJavaHashCode(f *testing.F) {
	for _, s := range []string{"", "TopicTest#order-1", "h\xc3\xa9llo", "\xf0\x9f\x98\x80x", "\xff\xfe\x80abcd", "a\xe2\x82",
		// The register lanes at their largest (0x7f bytes), a UNIQ_KEY, 8- and 4-byte runs around a non-ASCII byte.
		"\x7f\x7f\x7f\x7f\x7f\x7f\x7f\x7f\x7f\x7f\x7f\x7f\x7f", "7F00000100002A9F0000000000000001", "abcdefgh\xc3\xa9ijklmnopq~~~~"} {
		f.Add([]byte("Topic"), []byte(s))
	}
	f.Fuzz(func(t *testing.T, topic, key []byte) {
		if got, want := JavaHashCode(key), javaHashRef(key); got != want {
			t.Fatalf("%q: %d, want %d", key, got, want)
		}
		prefix := append(append([]byte(nil), topic...), '#')
		whole := append(append([]byte(nil), prefix...), key...)
		if got, want := JavaHashCodeFrom(JavaHashCode(prefix), key), javaHashRef(whole); got != want {
			t.Fatalf("%q + %q: %d, want %d", prefix, key, got, want)
		}
	})
}

// FuzzIndexKeyHasher: the prefix-reusing hasher gives
// IndexKeyHash(topic + "#" + key) for keys of one topic in a row, after a
// switch to another topic and back (topics ending mid-UTF-8 included).
func FuzzIndexKeyHasher(f *testing.F) {
	f.Add([]byte("TopicA"), []byte("TöpicB"), []byte("order-1"), []byte("7F00000100002A9F0000000000000001"))
	f.Add([]byte("a\xe2\x82"), []byte(""), []byte("\x82x"), []byte("\xff"))
	f.Add([]byte("T"), []byte("T"), []byte(""), []byte("😀"))
	f.Fuzz(func(t *testing.T, t1, t2, k1, k2 []byte) {
		var h IndexKeyHasher
		for _, c := range []struct{ topic, key []byte }{{t1, k1}, {t1, k2}, {t2, k1}, {t2, k2}, {t1, k1}} {
			whole := append(append(append([]byte(nil), c.topic...), '#'), c.key...)
			if got, want := h.Hash(c.topic, c.key), IndexKeyHash(whole); got != want {
				t.Fatalf("Hash(%q, %q) = %d, IndexKeyHash(%q) = %d", c.topic, c.key, got, whole, want)
			}
		}
	})
}
