package amqp10

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
)

// walkSeeds are messages as RabbitMQ writes them and in other encodings
// (symbolic descriptors, 32-bit sizes, an empty list, an amqp-value).
func walkSeeds(t testing.TB) [][]byte {
	t.Helper()
	big := bytes.Repeat([]byte("x"), 300)
	msgs := []Message{
		{Sections: []Section{
			NewSection(SectionHeader, FieldList(Bool(true), NullValue(), NullValue(), Bool(true), UintValue(0))),
			NewSection(SectionMessageAnnotations, MapValue(SymbolValue("x-exchange"), StringValue(""), SymbolValue("x-routing-key"), StringValue("q"))),
			NewSection(SectionProperties, FieldList(StringValue("m000000001"), NullValue(), NullValue(), NullValue(), NullValue(), NullValue(),
				SymbolValue("application/octet-stream"), NullValue(), NullValue(), TimestampValue(1700000000000))),
			NewSection(SectionApplicationProperties, MapValue(StringValue("seq"), LongValue(1))),
			NewSection(SectionData, BinaryValue([]byte("hello"))),
		}},
		{Sections: []Section{
			NewSection(SectionApplicationProperties, MapValue(StringValue(string(big)), StringValue(string(big)))),
			NewSection(SectionData, BinaryValue(big)),
			NewSection(SectionFooter, MapValue()),
		}},
		{Sections: []Section{NewSection(SectionAmqpValue, StringValue("v")), NewSection(SectionHeader, ListValue())}},
	}
	var out [][]byte
	for _, m := range msgs {
		b, err := AppendMessage(nil, m)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b)
	}
	// a symbolic descriptor, a list32 and a map32 by hand
	out = append(out,
		append([]byte{0x00, 0xa3, 0x17}, append([]byte("amqp:properties:list"), 0x00, 0x00, 0x00, 0x45, 0x00, 0x00, 0x00)...),
		[]byte{0x00, 0x53, 0x70, 0xd0, 0, 0, 0, 5, 0, 0, 0, 1, 0x41, 0x00, 0x53, 0x74, 0xd1, 0, 0, 0, 4, 0, 0, 0, 0, 0x00, 0x53, 0x75, 0xb0, 0, 0, 0, 1, 7},
		[]byte{0x00, 0x53, 0x70, 0x45, 0x00, 0x53, 0x75, 0xa0, 0},
	)
	return out
}

// walkSame checks that WalkSections (its decoder-free path for the usual
// encodings) reports what the decoder's walk from the first section
// reports: the same sections and the same error.
func walkSame(t *testing.T, b []byte) {
	t.Helper()
	var got, want []string
	collect := func(out *[]string) func(SectionInfo) error {
		return func(s SectionInfo) error {
			*out = append(*out, fmt.Sprintf("%d@%d+%d %x", s.Code, s.Offset, s.Size, s.Data))
			return nil
		}
	}
	gerr := WalkSections(b, 1000, collect(&got))
	werr := walkSections(b, 1000, 0, collect(&want))
	if fmt.Sprint(gerr) != fmt.Sprint(werr) || strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("% x:\n walk %v %v\n decoder %v %v", b, gerr, got, werr, want)
	}
}

// TestWalkSectionsFastSame: every seed, every cut of it and every byte of
// it set to a few values walks the same with and without the decoder.
func TestWalkSectionsFastSame(t *testing.T) {
	for _, m := range walkSeeds(t) {
		walkSame(t, m)
		for n := range len(m) {
			walkSame(t, m[:n])
		}
		c := make([]byte, len(m))
		for i := range m {
			for _, v := range []byte{0x00, 0x01, 0x02, 0x40, 0x45, 0x53, 0x70, 0x75, 0x77, 0xa0, 0xa3, 0xb0, 0xc0, 0xc1, 0xd0, 0xd1, 0xff, m[i] + 1, m[i] - 1} {
				copy(c, m)
				c[i] = v
				walkSame(t, c)
			}
		}
	}
}

func FuzzWalkSectionsFast(f *testing.F) {
	for _, m := range walkSeeds(f) {
		f.Add(m)
	}
	f.Fuzz(func(t *testing.T, b []byte) { walkSame(t, b) })
}
