package etf

import (
	"errors"
	"math/big"
	"reflect"
	"testing"

	"github.com/storectl/storectl/pkg/format"
)

func TestParseText(t *testing.T) {
	big1, _ := new(big.Int).SetString("123456789012345678901234567890", 10)
	for _, c := range []struct {
		in   string
		want Term
	}{
		{"abc.", Atom("abc")},
		{"rmq40@localhost.", Atom("rmq40@localhost")},
		{"'%2F_qq1'.", Atom("%2F_qq1")},
		{`'it''s'.`, nil}, // two atoms: invalid
		{"-12.", int64(-12)},
		{"16#ff.", int64(255)},
		{"-16#10.", int64(-16)},
		{"1_000.", int64(1000)},
		{"123456789012345678901234567890.", big1},
		{"1.5e3.", 1500.0},
		{"$a.", int64('a')},
		{`$\n.`, int64('\n')},
		{`"queue 'q' in vhost '/'".`, String("queue 'q' in vhost '/'")},
		{`"ab" "cd".`, String("abcd")},
		{`"".`, Nil{}},
		{`"\x{263A}x".`, List{Elems: []Term{int64(0x263a), int64('x')}, Tail: Nil{}}},
		{`"\101\x41\^A\s".`, String("AA\x01 ")},
		{"<<>>.", Binary{}},
		{"<<1,2,255>>.", Binary{1, 2, 255}},
		{`<<"qq1">>.`, Binary("qq1")},
		{`<<"ä"/utf8>>.`, Binary("ä")},
		{`<<"a","b",3>>.`, Binary("ab\x03")},
		{"{}.", Tuple{}},
		{"{a,{b,1}}.", Tuple{Atom("a"), Tuple{Atom("b"), int64(1)}}},
		{"[].", Nil{}},
		{"[a|b].", List{Elems: []Term{Atom("a")}, Tail: Atom("b")}},
		{"[1, 2].", List{Elems: []Term{int64(1), int64(2)}, Tail: Nil{}}},
		{"#{}.", Map{}},
		{"#{a => 1,\n  b =>\n   [x]}.", Map{{Key: Atom("a"), Value: int64(1)}, {Key: Atom("b"), Value: List{Elems: []Term{Atom("x")}, Tail: Nil{}}}}},
		{"<0.123.0>.", Opaque{Tag: 0, Raw: []byte("<0.123.0>")}},
		{"#Ref<0.1.2.3>.", Opaque{Tag: 0, Raw: []byte("#Ref<0.1.2.3>")}},
		{"% a comment\nx. ", Atom("x")},
	} {
		got, err := ParseText([]byte(c.in))
		if c.want == nil {
			if err == nil {
				t.Errorf("%q: accepted %v", c.in, got)
			}
			continue
		}
		if err != nil || len(got) != 1 || !reflect.DeepEqual(got[0], c.want) {
			t.Errorf("%q: %#v %v, want %#v", c.in, got, err, c.want)
		}
	}
	two, err := ParseText([]byte("{a,1}.\n{b,2}.\n"))
	if err != nil || len(two) != 2 {
		t.Fatalf("%v %v", two, err)
	}
}

func TestParseTextErrors(t *testing.T) {
	for _, c := range []struct {
		in  string
		off int64
		err error
	}{
		{"{a,b", 4, format.ErrShort},
		{"{a,b}", 5, format.ErrShort},
		{"{a b}.", 3, format.ErrInvalid},
		{`"abc`, 4, format.ErrShort},
		{"<<256>>.", 5, format.ErrInvalid},
		{"#{a 1}.", 4, format.ErrInvalid},
		{"36#.", 3, format.ErrInvalid},
		{"99#1.", 2, format.ErrInvalid},
		{")", 0, format.ErrInvalid},
	} {
		_, err := ParseText([]byte(c.in))
		var ce *format.CorruptError
		if !errors.As(err, &ce) || !errors.Is(err, c.err) || ce.Offset != c.off {
			t.Errorf("%q: %v, want %v at %d", c.in, err, c.err, c.off)
		}
	}
	deep := make([]byte, 0, 2*MaxTermDepth+10)
	for i := 0; i < MaxTermDepth+5; i++ {
		deep = append(deep, '[')
	}
	if _, err := ParseText(deep); !errors.Is(err, format.ErrTooLarge) {
		t.Fatalf("deep: %v", err)
	}
}

func FuzzParseText(f *testing.F) {
	for _, s := range []string{"#{id => {'%2F_qq1',rmq40@localhost},uid => <<\"2F_QQ1\">>}.",
		"{a,[1,2|3],\"s\\x{41}\",<<\"b\"/utf8>>,16#ff,1.5,$x,<0.1.2>}.", "[]."} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		_, err := ParseText(b)
		var ce *format.CorruptError
		if err != nil && !errors.As(err, &ce) {
			t.Fatalf("not a CorruptError: %v", err)
		}
		if ce != nil && (ce.Offset < 0 || ce.Offset > int64(len(b))) {
			t.Fatalf("offset %d outside input of %d", ce.Offset, len(b))
		}
	})
}
