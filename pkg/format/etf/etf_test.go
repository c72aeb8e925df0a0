package etf

import (
	"bytes"
	"errors"
	"math/big"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	"github.com/storectl/storectl/internal/testutil"
	"github.com/storectl/storectl/pkg/format"
)

// testBlobs returns every term_to_binary blob of the rabbitmq-mc fixture
// (OTP 27 and OTP 25 encoders, 3.13.7 and 4.1.8).
func testBlobs(t testing.TB) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	for _, dir := range []string{"blobs/3.13.7", "blobs/4.1.8", "alt-otp25/blobs/3.13.7", "alt-otp25/blobs/4.1.8"} {
		paths, err := filepath.Glob(testutil.Testdata("rabbitmq-mc", dir, "*.bin"))
		if err != nil || len(paths) == 0 {
			t.Fatalf("no blobs in %s: %v", dir, err)
		}
		for _, p := range paths {
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			out[dir+"/"+filepath.Base(p)] = b
		}
	}
	return out
}

func TestETFFixtureBlobs(t *testing.T) {
	blobs := testBlobs(t)
	for name, b := range blobs {
		term, err := DecodeExactTerm(b)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		tup, ok := term.(Tuple)
		if !ok || len(tup) != 4 || tup[0] != Atom("mc") || tup[1] != Atom("mc_amqpl") {
			t.Fatalf("%s: not an mc record: %#v", name, term)
		}
		n, err := SkipTerm(b)
		if err != nil || n != len(b) || !IsExactTerm(b) {
			t.Fatalf("%s: SkipTerm = %d, %v; len %d", name, n, err, len(b))
		}
		if IsExactTerm(append(b[:len(b):len(b)], 0)) {
			t.Fatalf("%s: trailing byte accepted", name)
		}
	}
	if len(blobs) != 68 {
		t.Fatalf("decoded %d blobs, want 68", len(blobs))
	}
}

func TestETFValues(t *testing.T) {
	bigNeg, _ := new(big.Int).SetString("-18446744073709551616", 10) // -(2^64)
	tests := []struct {
		name string
		in   []byte
		want Term
	}{
		{"small int", []byte{131, 97, 200}, int64(200)},
		{"negative int", []byte{131, 98, 0xff, 0xff, 0xff, 0xfe}, int64(-2)},
		{"small big fits", []byte{131, 110, 2, 1, 0x01, 0x02}, int64(-0x0201)},
		{"big min int64", []byte{131, 110, 8, 1, 0, 0, 0, 0, 0, 0, 0, 0x80}, int64(-1 << 63)},
		{"large big", []byte{131, 111, 0, 0, 0, 9, 1, 0, 0, 0, 0, 0, 0, 0, 0, 1}, bigNeg},
		{"new float", []byte{131, 70, 0x3f, 0xf8, 0, 0, 0, 0, 0, 0}, 1.5},
		{"old float", append([]byte{131, 99}, []byte("1.50000000000000000000e+00\x00\x00\x00\x00\x00")...), 1.5},
		{"latin1 atom", []byte{131, 100, 0, 2, 'o', 0xe9}, Atom("oé")},
		{"small atom", []byte{131, 115, 1, 'x'}, Atom("x")},
		{"utf8 atom", []byte{131, 118, 0, 2, 0xc3, 0xa9}, Atom("é")},
		{"binary", []byte{131, 109, 0, 0, 0, 2, 'h', 'i'}, Binary("hi")},
		{"bit binary", []byte{131, 77, 0, 0, 0, 1, 3, 0xe0}, BitBinary{Bytes: []byte{0xe0}, Bits: 3}},
		{"string", []byte{131, 107, 0, 2, 1, 2}, String{1, 2}},
		{"nil", []byte{131, 106}, Nil{}},
		{"proper list", []byte{131, 108, 0, 0, 0, 1, 97, 1, 106}, List{Elems: []Term{int64(1)}, Tail: Nil{}}},
		{"improper list", []byte{131, 108, 0, 0, 0, 1, 97, 1, 97, 2}, List{Elems: []Term{int64(1)}, Tail: int64(2)}},
		{"tuple", []byte{131, 104, 2, 97, 1, 106}, Tuple{int64(1), Nil{}}},
		{"large tuple", []byte{131, 105, 0, 0, 0, 1, 97, 1}, Tuple{int64(1)}},
		{"map", []byte{131, 116, 0, 0, 0, 1, 119, 1, 'k', 97, 7}, Map{{Key: Atom("k"), Value: int64(7)}}},
		{"pid", []byte{131, 88, 119, 1, 'n', 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 3},
			Opaque{Tag: 88, Raw: []byte{88, 119, 1, 'n', 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 3}}},
		{"ref", []byte{131, 90, 0, 1, 119, 1, 'n', 0, 0, 0, 1, 0, 0, 0, 9},
			Opaque{Tag: 90, Raw: []byte{90, 0, 1, 119, 1, 'n', 0, 0, 0, 1, 0, 0, 0, 9}}},
		{"export", []byte{131, 113, 119, 1, 'm', 119, 1, 'f', 97, 2},
			Opaque{Tag: 113, Raw: []byte{113, 119, 1, 'm', 119, 1, 'f', 97, 2}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := DecodeExactTerm(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got %#v, want %#v", got, tt.want)
			}
			if n, err := SkipTerm(tt.in); err != nil || n != len(tt.in) {
				t.Fatalf("SkipTerm = %d, %v", n, err)
			}
		})
	}
}

func TestETFErrors(t *testing.T) {
	deep := []byte{131}
	for i := 0; i <= MaxTermDepth+1; i++ {
		deep = append(deep, 104, 1)
	}
	deep = append(deep, 106)
	tests := []struct {
		name      string
		in        []byte
		wantField string
		wantOff   int64
		wantErr   error
	}{
		{"empty", nil, "version", 0, format.ErrShort},
		{"bad version", []byte{130, 106}, "version", 0, format.ErrMagic},
		{"no tag", []byte{131}, "tag", 1, format.ErrShort},
		{"compressed", []byte{131, 80, 0, 0, 0, 1, 0x78}, "tag", 1, format.ErrUnsupported},
		{"atom cache ref", []byte{131, 82, 0}, "tag", 1, format.ErrUnsupported},
		{"unknown tag", []byte{131, 1}, "tag", 1, format.ErrInvalid},
		{"binary too long", []byte{131, 109, 0, 0, 0, 9, 1}, "binaryLength", 2, format.ErrShort},
		{"huge list count", []byte{131, 108, 0xff, 0xff, 0xff, 0xff, 106}, "listLength", 2, format.ErrShort},
		{"huge map count", []byte{131, 116, 0, 0, 0, 3, 97, 1, 97, 1}, "mapArity", 2, format.ErrShort},
		{"tuple short", []byte{131, 104, 3, 97, 1}, "tag", 5, format.ErrShort},
		{"list without tail", []byte{131, 108, 0, 0, 0, 1, 97, 1}, "tag", 8, format.ErrShort},
		{"bad utf8 atom", []byte{131, 119, 1, 0xff}, "atom", 2, format.ErrInvalid},
		{"bits zero", []byte{131, 77, 0, 0, 0, 1, 0, 1}, "bits", 6, format.ErrInvalid},
		{"bits nine", []byte{131, 77, 0, 0, 0, 1, 9, 1}, "bits", 6, format.ErrInvalid},
		{"nan", []byte{131, 70, 0x7f, 0xf8, 0, 0, 0, 0, 0, 1}, "float", 2, format.ErrInvalid},
		{"bad old float", append([]byte{131, 99}, make([]byte, 31)...), "float", 2, format.ErrInvalid},
		{"pid bad node", []byte{131, 88, 97, 1}, "node", 2, format.ErrInvalid},
		{"ref too many words", []byte{131, 90, 0, 9, 119, 0}, "refLength", 2, format.ErrTooLarge},
		{"old fun", []byte{131, 117, 0}, "tag", 1, format.ErrUnsupported},
		{"fun size below 4", []byte{131, 112, 0, 0, 0, 1}, "funSize", 2, format.ErrInvalid},
		{"too deep", deep, "depth", 1 + 2*(MaxTermDepth+1), format.ErrTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := DecodeTerm(tt.in)
			var ce *format.CorruptError
			if !errors.As(err, &ce) || !errors.Is(err, tt.wantErr) || ce.Field != tt.wantField || ce.Offset != tt.wantOff {
				t.Fatalf("err = %v (%#v), want %s@%d %v", err, ce, tt.wantField, tt.wantOff, tt.wantErr)
			}
			_, err2 := SkipTerm(tt.in)
			if err2 == nil || err2.Error() != err.Error() {
				t.Fatalf("SkipTerm err = %v, DecodeTerm err = %v", err2, err)
			}
		})
	}
	if _, err := DecodeExactTerm([]byte{131, 106, 0}); err == nil {
		t.Fatal("trailing byte accepted")
	}
}

func TestSkipTermAllocs(t *testing.T) {
	b, err := os.ReadFile(testutil.Testdata("rabbitmq-mc", "blobs/4.1.8/16-dead-lettered-expired.bin"))
	if err != nil {
		t.Fatal(err)
	}
	if a := testing.AllocsPerRun(100, func() { _, _ = SkipTerm(b) }); a != 0 {
		t.Fatalf("SkipTerm allocates %.1f times per call", a)
	}
}

func FuzzETF(f *testing.F) {
	for _, b := range testBlobs(f) {
		if len(b) < 4096 {
			f.Add(b)
		}
	}
	f.Add([]byte{131, 108, 0, 0, 0, 1, 97, 1, 97, 2})
	f.Add([]byte{131, 99, '1', '.', '5'})
	f.Fuzz(func(t *testing.T, b []byte) {
		term, n, err := DecodeTerm(b)
		n2, err2 := SkipTerm(b)
		if (err == nil) != (err2 == nil) || n != n2 {
			t.Fatalf("DecodeTerm n=%d err=%v; SkipTerm n=%d err=%v", n, err, n2, err2)
		}
		if IsExactTerm(b) != (err == nil && n == len(b)) {
			t.Fatalf("IsExactTerm = %v, DecodeTerm n=%d of %d, err=%v", IsExactTerm(b), n, len(b), err)
		}
		if err != nil {
			var ce *format.CorruptError
			if !errors.As(err, &ce) || ce.Offset < 0 || ce.Offset > int64(len(b)) {
				t.Fatalf("bad error %v", err)
			}
			return
		}
		if n > len(b) || n < 2 || term == nil {
			t.Fatalf("n = %d of %d, term %v", n, len(b), term)
		}
		if IsExactTerm(b[:n]) != true {
			t.Fatal("IsExactTerm disagrees")
		}
	})
}

// exactBySkip is IsExactTerm's definition: SkipTerm accepts b, using all
// of it.
func exactBySkip(b []byte) bool {
	n, err := SkipTerm(b)
	return err == nil && n == len(b)
}

// TestIsExactTermMatchesSkip: IsExactTerm's own walk of the common tags
// gives SkipTerm's answer on every fixture blob, every prefix of each, each
// with one byte changed at every position (to a few values that make
// lengths, tags and atom bytes wrong), and each with a trailing byte.
func TestIsExactTermMatchesSkip(t *testing.T) {
	check := func(name string, b []byte) {
		t.Helper()
		if got, want := IsExactTerm(b), exactBySkip(b); got != want {
			t.Fatalf("%s: IsExactTerm = %v, SkipTerm says %v (% x)", name, got, want, b)
		}
	}
	n := 0
	for name, blob := range testBlobs(t) {
		if len(blob) > 2048 {
			blob = blob[:2048] // the prefixes and mutations of the start
		}
		check(name, blob)
		check(name+" + 1 byte", append(slices.Clone(blob), 0))
		for k := range len(blob) {
			check(name+" prefix", blob[:k])
			b := slices.Clone(blob)
			for _, v := range []byte{0, 0x7F, 0xC3, 0xFF, b[k] ^ 1, TagList, TagAtomUTF8} {
				b[k] = v
				check(name+" changed", b)
				n++
			}
		}
	}
	deep := []byte{Version}
	for range MaxTermDepth + 2 {
		deep = append(deep, TagSmallTuple, 1)
	}
	check("too deep", append(deep, TagNil))
	check("deep enough", append(deep[:1+2*MaxTermDepth], TagNil))
	long := append([]byte{Version, TagAtomUTF8, 1, 0}, bytes.Repeat([]byte("é"), 128)...) // 256 bytes, 128 runes
	check("long utf8 atom", long)
	check("too long utf8 atom", append([]byte{Version, TagAtomUTF8, 1, 0}, bytes.Repeat([]byte("a"), 256)...))
	check("long latin1 atom", append([]byte{Version, TagAtom, 1, 0}, bytes.Repeat([]byte("a"), 256)...))
	t.Logf("%d changed blobs", n)
}

func BenchmarkSkipTerm(b *testing.B) {
	blob, err := os.ReadFile(testutil.Testdata("rabbitmq-mc", "blobs/4.1.8/06-headers-nested.bin"))
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(blob)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := SkipTerm(blob); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkIsExactTerm asks IsExactTerm of a 3.13.7 message term, as the
// .rdq walk does of every framed candidate; decoder: the same question put
// to SkipTerm, as IsExactTerm did before its own walk.
func BenchmarkIsExactTerm(b *testing.B) {
	blob, err := os.ReadFile(testutil.Testdata("rabbitmq-mc", "blobs/3.13.7/06-headers-nested.bin"))
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name string
		fn   func([]byte) bool
	}{{"walk", IsExactTerm}, {"decoder", exactBySkip}} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(blob)))
			b.ReportAllocs()
			for b.Loop() {
				if !c.fn(blob) {
					b.Fatal("not a term")
				}
			}
		})
	}
}
