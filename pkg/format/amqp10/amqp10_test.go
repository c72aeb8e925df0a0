package amqp10_test

import (
	"bytes"
	"encoding/hex"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/storectl/storectl/internal/streamtest"
	"github.com/storectl/storectl/pkg/format"
	"github.com/storectl/storectl/pkg/format/amqp10"
	"github.com/storectl/storectl/pkg/format/osiris"
)

func TestMain(m *testing.M) { os.Exit(streamtest.Main(m)) }

func h(s string) []byte {
	b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
	if err != nil {
		panic(err)
	}
	return b
}

// TestSmallestEncodings checks the constructors against the encodings
// amqp10_binary_generator chooses (the bytes RabbitMQ writes).
func TestSmallestEncodings(t *testing.T) {
	long := strings.Repeat("x", 300)
	for _, c := range []struct {
		v    amqp10.Value
		want string
	}{
		{amqp10.NullValue(), "40"},
		{amqp10.Bool(true), "41"},
		{amqp10.Bool(false), "42"},
		{amqp10.UintValue(0), "43"},
		{amqp10.UintValue(7), "52 07"},
		{amqp10.UintValue(300), "70 0000012c"},
		{amqp10.UlongValue(0), "44"},
		{amqp10.UlongValue(0x73), "53 73"},
		{amqp10.UlongValue(1 << 40), "80 0000010000000000"},
		{amqp10.IntValue(-5), "54 fb"},
		{amqp10.IntValue(1659), "71 0000067b"},
		{amqp10.LongValue(127), "55 7f"},
		{amqp10.LongValue(-129), "81 ffffffffffffff7f"},
		{amqp10.UbyteValue(2), "50 02"},
		{amqp10.ShortValue(-2), "61 fffe"},
		{amqp10.DoubleValue(400.5), "82 4079080000000000"},
		{amqp10.TimestampValue(1767225600000), "83 0000019b76daa800"},
		{amqp10.StringValue("s1a"), "a1 03 733161"},
		{amqp10.StringValue(""), "a1 00"},
		{amqp10.SymbolValue("x-exchange"), "a3 0a 782d65786368616e6765"},
		{amqp10.BinaryValue([]byte{0, 1}), "a0 02 0001"},
		{amqp10.StringValue(long), "b1 0000012c " + hex.EncodeToString([]byte(long))},
		{amqp10.ListValue(), "45"},
		{amqp10.ListValue(amqp10.Bool(true), amqp10.NullValue()), "c0 03 02 41 40"},
		{amqp10.MapValue(amqp10.SymbolValue("k"), amqp10.UintValue(1)), "c1 06 02 a3016b 5201"},
		{amqp10.ArrayValue(amqp10.Symbol, amqp10.SymbolValue("a"), amqp10.SymbolValue("bc")), "e0 0d 02 b3 00000001 61 00000002 6263"},
		{amqp10.DescribedValue(amqp10.UlongValue(0x75), amqp10.BinaryValue([]byte("hi"))), "00 53 75 a0 02 6869"},
	} {
		got, err := amqp10.Append(nil, c.v)
		if err != nil {
			t.Errorf("%v: %v", c.v, err)
			continue
		}
		if want := h(c.want); !bytes.Equal(got, want) {
			t.Errorf("%v: % x, want % x", c.v, got, want)
		}
		back, n, err := amqp10.Decode(got, 0)
		if err != nil || n != len(got) {
			t.Errorf("%v: decode %v %d", c.v, err, n)
			continue
		}
		if back.String() != c.v.String() {
			t.Errorf("decode: %v, want %v", back, c.v)
		}
		if n2, err := amqp10.Skip(got, 0); err != nil || n2 != n {
			t.Errorf("%v: skip %d %v", c.v, n2, err)
		}
	}
	// a list of 255 items takes the four-byte form
	items := make([]amqp10.Value, 255)
	b := amqp10.MustAppend(nil, amqp10.ListValue(items...))
	if b[0] != 0xd0 {
		t.Errorf("255 items: code %#x", b[0])
	}
}

// TestValueAccessors decodes each width and checks the typed accessors.
func TestValueAccessors(t *testing.T) {
	for _, c := range []struct {
		in   string
		typ  amqp10.Type
		str  string
		n    int64
		fval float64
	}{
		{"51 ff", amqp10.Byte, "-1", -1, 0},
		{"61 8000", amqp10.Short, "-32768", -32768, 0},
		{"71 80000000", amqp10.Int, "-2147483648", math.MinInt32, 0},
		{"54 80", amqp10.Int, "-128", -128, 0},
		{"55 ff", amqp10.Long, "-1", -1, 0},
		{"56 01", amqp10.Boolean, "true", 1, 0},
		{"72 3fc00000", amqp10.Float, "1.5", 0, 1.5},
		{"73 00002713", amqp10.Char, "'✓'", 0x2713, 0},
		{"98 000102030405060708090a0b0c0d0e0f", amqp10.UUID, "00010203-0405-0607-0809-0a0b0c0d0e0f", 0, 0},
		{"e0 02 02 41", amqp10.Array, "[true, true]", 0, 0},
		{"f0 00000005 00000002 43", amqp10.Array, "[0, 0]", 0, 0},
		{"e0 07 02 00 53 01 50 05 06", amqp10.Array, "[described(1, 5), described(1, 6)]", 0, 0},
	} {
		v, n, err := amqp10.Decode(h(c.in), 0)
		if err != nil || n != len(h(c.in)) {
			t.Errorf("%s: %v (%d bytes)", c.in, err, n)
			continue
		}
		if v.Type != c.typ || v.String() != c.str {
			t.Errorf("%s: %s %q, want %s %q", c.in, v.Type, v.String(), c.typ, c.str)
		}
		if c.n != 0 && v.Int() != c.n && int64(v.Num) != c.n {
			t.Errorf("%s: int %d", c.in, v.Int())
		}
		if c.fval != 0 && v.Float() != c.fval {
			t.Errorf("%s: float %v", c.in, v.Float())
		}
		re, err := amqp10.Append(nil, v)
		if err != nil || !bytes.Equal(re, h(c.in)) {
			t.Errorf("%s: re-encoded % x (%v)", c.in, re, err)
		}
	}
}

// TestDecodeErrors: malformed values fail with the cause and the offset
// of the byte at fault, never a panic or a huge allocation.
func TestDecodeErrors(t *testing.T) {
	for _, c := range []struct {
		in    string
		err   error
		off   int64
		field string
	}{
		{"", format.ErrShort, 10, "constructor"},
		{"ff", format.ErrMagic, 10, "constructor"},
		{"71 0000", format.ErrShort, 11, "int"},
		{"a1 05 6162", format.ErrShort, 12, "string"},
		{"b1 ffffffff", format.ErrShort, 11, "string size"},
		{"56 02", format.ErrInvalid, 11, "boolean"},
		{"c0 05 03 41 41", format.ErrShort, 12, "list"},
		{"c0 02 05 41", format.ErrTooLarge, 12, "list count"},
		{"c1 03 01 41 41", format.ErrInvalid, 12, "map count"},
		{"c0 03 01 41 41", format.ErrInvalid, 11, "list size"},
		{"f0 00000005 ffffffff 40", format.ErrTooLarge, 19, "value count"},
		{"e0 02 01 ee", format.ErrMagic, 13, "array constructor"},
		{"00 53", format.ErrShort, 12, "ulong"},
		{strings.Repeat("00 ", 70) + "40 40", format.ErrTooLarge, 10 + 64, "described"},
		{strings.Repeat("c0 01 01 ", 3), format.ErrTooLarge, 12, "list count"},
		{"c0 04 01 c0 01 01", format.ErrTooLarge, 15, "list count"},
	} {
		_, _, err := amqp10.Decode(h(c.in), 10)
		var ce *format.CorruptError
		if !errors.As(err, &ce) || !errors.Is(err, c.err) || ce.Offset != c.off || ce.Field != c.field {
			t.Errorf("%q: %v, want %v at %d (%s)", c.in, err, c.err, c.off, c.field)
		}
		if _, err2 := amqp10.Skip(h(c.in), 10); (err2 == nil) != (err == nil) {
			t.Errorf("%q: Skip %v, Decode %v", c.in, err2, err)
		}
	}
}

func TestMessage(t *testing.T) {
	m := amqp10.Message{Sections: []amqp10.Section{
		amqp10.NewSection(amqp10.SectionHeader, amqp10.FieldList(amqp10.Bool(true), amqp10.NullValue())),
		amqp10.NewSection(amqp10.SectionMessageAnnotations, amqp10.MapValue(amqp10.SymbolValue("x-routing-key"), amqp10.StringValue("q"))),
		amqp10.NewSection(amqp10.SectionProperties, amqp10.FieldList(amqp10.StringValue("m1"), amqp10.NullValue(), amqp10.NullValue())),
		amqp10.NewSection(amqp10.SectionApplicationProperties, amqp10.MapValue(amqp10.StringValue("seq"), amqp10.IntValue(3))),
		amqp10.NewSection(amqp10.SectionData, amqp10.BinaryValue([]byte("hel"))),
		amqp10.NewSection(amqp10.SectionData, amqp10.BinaryValue([]byte("lo"))),
	}}
	b, err := amqp10.AppendMessage(nil, m)
	if err != nil {
		t.Fatal(err)
	}
	got, err := amqp10.DecodeMessage(b, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got.Properties().MessageID.Str() != "m1" || !got.Header().Durable.Bool() || !got.Header().Priority.IsNull() {
		t.Errorf("fields: %+v %+v", got.Properties(), got.Header())
	}
	if v, ok := got.ApplicationProperties().Lookup(amqp10.String, "seq"); !ok || v.Int() != 3 {
		t.Errorf("seq %v", v)
	}
	if d := got.Data(); len(d) != 2 || string(d[0])+string(d[1]) != "hello" || got.BodyKind() != "data" {
		t.Errorf("data %q", d)
	}
	var n int
	if err := amqp10.WalkSections(b, 0, func(s amqp10.SectionInfo) error { n++; return nil }); err != nil || n != 6 {
		t.Errorf("walk: %d %v", n, err)
	}
	// a symbolic descriptor is the same section
	sym := amqp10.MustAppend(nil, amqp10.DescribedValue(amqp10.SymbolValue("amqp:data:binary"), amqp10.BinaryValue([]byte("z"))))
	if sm, err := amqp10.DecodeMessage(sym, 0); err != nil || string(sm.Data()[0]) != "z" {
		t.Errorf("symbolic: %v", err)
	}
	// not a section
	for _, bad := range []string{"41", "00 53 99 40", "00 53 75 41", "00 53 73 a1 01 61"} {
		if _, err := amqp10.DecodeMessage(h(bad), 0); err == nil {
			t.Errorf("%s: decoded", bad)
		}
		if err := amqp10.WalkSections(h(bad), 0, nil); err == nil {
			t.Errorf("%s: walked", bad)
		}
	}
}

// realMessages returns the bodies of the user entries of a real segment.
func realMessages(t testing.TB) [][]byte {
	ds := streamtest.Datasets40[0]
	var out [][]byte
	for _, d := range streamtest.StreamDirs(t, ds) {
		if !strings.Contains(d, "__s1c_") {
			continue
		}
		p := filepath.Join(d, "00000000000000000000.segment")
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		sr, err := osiris.NewSegmentReader(bytes.NewReader(b), int64(len(b)))
		if err != nil {
			t.Fatal(err)
		}
		for sr.Next() {
			c := sr.Chunk()
			if c.Header.Type != osiris.ChunkUser {
				continue
			}
			it := osiris.Entries(c.Data, 0)
			for it.Next() {
				out = append(out, append([]byte(nil), it.Entry().Body...))
			}
		}
	}
	if len(out) == 0 {
		t.Fatal("no messages")
	}
	return out
}

func FuzzDecodeValue(f *testing.F) {
	for _, m := range realMessages(f) {
		f.Add(m)
		if len(m) > 3 {
			f.Add(m[3:]) // past the first section's descriptor: a list or map
		}
	}
	f.Add(h("f0 00000005 00000002 43"))
	f.Add(h("e0 07 02 00 53 01 50 05 06"))
	f.Fuzz(func(t *testing.T, b []byte) {
		v, n, err := amqp10.Decode(b, 0)
		sn, serr := amqp10.Skip(b, 0)
		if (err == nil) != (serr == nil) || (err == nil && sn != n) {
			t.Fatalf("Decode %d %v, Skip %d %v", n, err, sn, serr)
		}
		if err != nil {
			var ce *format.CorruptError
			if !errors.As(err, &ce) || ce.Offset < 0 || ce.Offset > int64(len(b)) {
				t.Fatalf("error %v", err)
			}
			return
		}
		re, err := amqp10.Append(nil, v)
		if err != nil {
			t.Fatalf("re-encode: %v", err)
		}
		if !bytes.Equal(re, b[:n]) {
			t.Fatalf("re-encoded % x, decoded % x", re, b[:n])
		}
		_ = v.String()
	})
}

func FuzzDecodeMessage(f *testing.F) {
	for _, m := range realMessages(f) {
		f.Add(m)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := amqp10.DecodeMessage(b, 0)
		werr := amqp10.WalkSections(b, 0, nil)
		if err == nil && werr != nil {
			// the walk checks less (a section's items only by size), never more
			t.Fatalf("DecodeMessage ok, WalkSections %v", werr)
		}
		if err != nil {
			return
		}
		re, err := amqp10.AppendMessage(nil, m)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(re, b) {
			t.Fatalf("re-encoded differently")
		}
		_ = m.Properties()
		_ = m.Header()
		_ = m.Data()
	})
}
