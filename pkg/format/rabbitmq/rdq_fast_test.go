package rabbitmq_test

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	gen "github.com/storectl/storectl/internal/gen/rabbitmq"
	"github.com/storectl/storectl/internal/testutil"
	"github.com/storectl/storectl/pkg/format/etf"
	rfmt "github.com/storectl/storectl/pkg/format/rabbitmq"
)

// fixtureBodies returns the body of every record of every .rdq file of
// the RabbitMQ fixtures (the dataset tarballs and testdata/rabbitmq-mc).
func fixtureBodies(t testing.TB) [][]byte {
	t.Helper()
	var files [][]byte
	for _, dir := range []string{"rabbitmq/datasets", "rabbitmq-4.0/datasets"} {
		tars, err := filepath.Glob(testutil.Testdata(dir, "*.tar.gz"))
		if err != nil || len(tars) == 0 {
			t.Fatalf("%s: no tarballs (%v)", dir, err)
		}
		for _, tb := range tars {
			for name, b := range testutil.ReadTar(t, tb) {
				if strings.HasSuffix(name, ".rdq") {
					files = append(files, b)
				}
			}
		}
	}
	mc, err := filepath.Glob(testutil.Testdata("rabbitmq-mc", "*.rdq"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range mc {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, b)
	}
	var bodies [][]byte
	for _, b := range files {
		for _, c := range rfmt.ScanData(b, rfmt.ScanOptions{}) {
			bodies = append(bodies, b[c.Offset+rfmt.RDQHeaderLen:c.Offset+c.TotalSize-1])
		}
	}
	if len(bodies) == 0 {
		t.Fatal("no fixture records")
	}
	return bodies
}

// shapeTerm builds a #basic_message{} of the fast shape (or, with odd,
// one detail off it) from r.
func shapeTerm(r *rand.Rand, odd int) etf.Term {
	bin := func() etf.Binary {
		b := make([]byte, r.IntN(3)*r.IntN(40))
		for i := range b {
			b[i] = byte(r.UintN(256))
		}
		return b
	}
	bins := func() etf.Term {
		n := r.IntN(4)
		if n == 0 {
			return etf.Nil{}
		}
		l := etf.List{Tail: etf.Nil{}}
		for range n {
			l.Elems = append(l.Elems, bin())
		}
		return l
	}
	content := etf.Tuple{etf.Atom("content"), int64(r.IntN(256)), etf.Atom("none"), bin(),
		etf.Atom("rabbit_framing_amqp_0_9_1"), bins()}
	persistent := etf.Atom("true")
	if r.IntN(2) == 0 {
		persistent = "false"
	}
	t := etf.Tuple{etf.Atom("basic_message"),
		etf.Tuple{etf.Atom("resource"), bin(), etf.Atom("exchange"), bin()},
		bins(), content, bin(), persistent}
	switch odd {
	case 1: // an improper payload list
		content[5] = etf.List{Elems: []etf.Term{bin()}, Tail: bin()}
	case 2: // decoded properties
		content[2] = etf.Tuple{etf.Atom("P_basic"), etf.Atom("undefined")}
	case 3: // a class id past a small integer
		content[1] = int64(60000)
	case 4: // another atom
		t[5] = etf.Atom("maybe")
	case 5: // a routing key that is not a binary
		t[2] = etf.List{Elems: []etf.Term{etf.Atom("k")}, Tail: etf.Nil{}}
	case 6: // an id that is an atom
		t[4] = etf.Atom("undefined")
	}
	return t
}

// shapeBases returns well-formed bodies: the fast shape in both atom
// encodings, near misses the general walk decides, and gen.Body records.
func shapeBases(t testing.TB) (shaped, other [][]byte) {
	t.Helper()
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 200 {
		odd := 0
		if i%3 == 2 {
			odd = 1 + i%6
		}
		b, err := etf.EncodeTerm(shapeTerm(r, odd), etf.AtomEncoding(i%2))
		if err != nil {
			t.Fatal(err)
		}
		if odd == 0 {
			shaped = append(shaped, b)
		} else {
			other = append(other, b)
		}
	}
	for i := range 20 {
		m := &gen.Message{Exchange: "ex", RoutingKey: "rk", Payload: make([]byte, i*7)}
		if i%2 == 0 {
			m.MessageID = "m1"
		}
		shaped = append(shaped, gen.Body(gen.BasicMessage, m))
		other = append(other, gen.Body(gen.MC, m))
	}
	return shaped, other
}

// checkShape fails t unless the fast check accepts only what
// etf.IsExactTerm accepts and exactBody equals it.
func checkShape(t *testing.T, what string, b []byte) bool {
	t.Helper()
	want := etf.IsExactTerm(b)
	fast := rfmt.BasicMessageShape(b)
	if fast && !want {
		t.Fatalf("%s: the fast shape takes % x, IsExactTerm does not", what, b)
	}
	if got := rfmt.ExactBody(b); got != want {
		t.Fatalf("%s: exactBody %v, IsExactTerm %v on % x", what, got, want, b)
	}
	return fast
}

// TestBasicMessageShapeSameAsWalker: on every fixture record body, on
// generated bodies (the shape and near misses) and on their mutations
// (each byte changed, every truncation, a byte appended) the fast check
// accepts nothing IsExactTerm rejects, and exactBody equals IsExactTerm.
// Every generated body of the shape takes the fast path.
func TestBasicMessageShapeSameAsWalker(t *testing.T) {
	fixtures := fixtureBodies(t)
	fastFix := 0
	for i, b := range fixtures {
		if checkShape(t, "fixture", b) {
			fastFix++
		}
		if i%50 == 0 {
			mutateShape(t, b)
		}
	}
	t.Logf("%d fixture bodies, %d of the fast shape", len(fixtures), fastFix)
	shaped, other := shapeBases(t)
	for _, b := range shaped {
		if !checkShape(t, "shaped", b) {
			t.Fatalf("a body of the shape misses the fast path: % x", b)
		}
		mutateShape(t, b)
	}
	for _, b := range other {
		if checkShape(t, "near miss", b) {
			t.Fatalf("a body off the shape takes the fast path: % x", b)
		}
		mutateShape(t, b)
	}
}

// mutateShape checks every one-byte change (to 0, 0xFF, ±1 and a few tag
// bytes), every truncation and a byte appended to b; of a large body only
// the first 512 and the last 64 positions (the rest is payload bytes).
func mutateShape(t *testing.T, b []byte) {
	t.Helper()
	m := make([]byte, len(b)+1)
	for i := range b {
		if i >= 512 && i < len(b)-64 {
			continue
		}
		for _, v := range []byte{0, 0xFF, b[i] + 1, b[i] - 1, etf.TagNil, etf.TagBinary, etf.TagSmallAtomUTF8} {
			copy(m, b)
			m[i] = v
			checkShape(t, "mutated", m[:len(b)])
		}
	}
	for n := range len(b) {
		if n >= 512 && n < len(b)-64 {
			continue
		}
		checkShape(t, "truncated", b[:n])
	}
	copy(m, b)
	m[len(b)] = etf.TagNil
	checkShape(t, "appended", m)
}

// FuzzBasicMessageShape: for any bytes the fast check accepts only what
// IsExactTerm accepts, and exactBody equals IsExactTerm.
func FuzzBasicMessageShape(f *testing.F) {
	shaped, other := shapeBases(f)
	for _, b := range append(shaped[:20], other[:20]...) {
		f.Add(b)
	}
	for i, b := range fixtureBodies(f) {
		if i%40 == 0 {
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		checkShape(t, "fuzz", b)
	})
}

// BenchmarkExactBody: the record term check on generated #basic_message{}
// bodies, fast shape first (exactBody) against the general walk.
func BenchmarkExactBody(b *testing.B) {
	shaped, _ := shapeBases(b)
	for _, bc := range []struct {
		name string
		f    func([]byte) bool
	}{{"exactBody", rfmt.ExactBody}, {"IsExactTerm", etf.IsExactTerm}} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				for _, s := range shaped {
					if !bc.f(s) {
						b.Fatal("rejected")
					}
				}
			}
		})
	}
}
