package rabbitmq

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/storectl/storectl/internal/testutil"
	"github.com/storectl/storectl/pkg/format"
	"github.com/storectl/storectl/pkg/format/etf"
)

// TestCleanDotFixtures parses both clean-shutdown clean.dot files and
// checks that EncodeCleanDot of the result gives the file back byte for
// byte.
func TestCleanDotFixtures(t *testing.T) {
	tests := []struct {
		fixture, node string
		refs          int    // durable queues with a persistent store client (README)
		module        string // 4.0 no longer writes index_module
	}{
		{"rabbitmq", "rmqfix@localhost", 3, "rabbit_msg_store_ets_index"},
		{"rabbitmq-4.0", "rmq40@localhost", 4, ""},
	}
	for _, tt := range tests {
		b, err := os.ReadFile(filepath.Join(etsStoreDir(t, tt.fixture, tt.node), "clean.dot"))
		if err != nil {
			t.Fatal(err)
		}
		cd, err := ParseCleanDot(b)
		if err != nil {
			t.Fatalf("%s: %v", tt.fixture, err)
		}
		if len(cd.ClientRefs) != tt.refs || cd.IndexModule != tt.module {
			t.Errorf("%s: %d refs, module %q", tt.fixture, len(cd.ClientRefs), cd.IndexModule)
		}
		if got := EncodeCleanDot(cd); !bytes.Equal(got, b) {
			t.Errorf("%s: rendered\n%s\nfile\n%s", tt.fixture, got, b)
		}
	}
}

func TestCleanDotSyntax(t *testing.T) {
	cd, err := ParseCleanDot([]byte("% comment\n{client_refs, [<<\"abcdefghijklmnop\">>]}.\n{other,'Quoted',-5,\"s\",[a|[]]}.\n"))
	if err == nil {
		t.Fatal("improper list syntax accepted")
	}
	cd, err = ParseCleanDot([]byte("% comment\n{client_refs, [<<\"abcdefghijklmnop\">>]}.\n{other,'Quoted',-5,\"s\",[]}.\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := etf.Tuple{etf.Atom("other"), etf.Atom("Quoted"), int64(-5), etf.String("s"), etf.Nil{}}
	if len(cd.ClientRefs) != 1 || string(cd.ClientRefs[0][:]) != "abcdefghijklmnop" || !reflect.DeepEqual(cd.Terms[1], want) {
		t.Fatalf("%+v", cd)
	}
	tests := []struct {
		in        string
		wantField string
		wantOff   int64
		wantErr   error
	}{
		{"{client_refs,[<<1,2>>]}.", "client_refs", 0, format.ErrInvalid},
		{"{a,b}", "term", 5, format.ErrShort},
		{"{a,<<256>>}.", "binary", 5, format.ErrInvalid},
		{"{a,#}.", "term", 3, format.ErrInvalid},
		{"{index_module,<<>>}.", "index_module", 0, format.ErrInvalid},
		{strings.Repeat("{", etf.MaxTermDepth+2), "depth", etf.MaxTermDepth + 1, format.ErrTooLarge},
	}
	for _, tt := range tests {
		_, err := ParseCleanDot([]byte(tt.in))
		var ce *format.CorruptError
		if !errors.As(err, &ce) || !errors.Is(err, tt.wantErr) || ce.Field != tt.wantField || ce.Offset != tt.wantOff {
			t.Errorf("%q: err = %v", tt.in, err)
		}
	}
}

func FuzzCleanDot(f *testing.F) {
	for _, fx := range []struct{ fixture, node string }{{"rabbitmq", "rmqfix@localhost"}, {"rabbitmq-4.0", "rmq40@localhost"}} {
		root := testutil.Untar(f, testutil.Testdata(fx.fixture, "datasets", "clean-shutdown.tar.gz"))
		b, err := os.ReadFile(filepath.Join(rdqVhostDir(root, fx.node), "msg_store_persistent", "clean.dot"))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte("{a,'b\\'c',\"d\",-1,[x,y],<<\"z\">>}."))
	f.Fuzz(func(t *testing.T, b []byte) {
		cd, err := ParseCleanDot(b)
		if err != nil {
			var ce *format.CorruptError
			if !errors.As(err, &ce) || ce.Offset < 0 || ce.Offset > int64(len(b)) {
				t.Fatalf("bad error %v", err)
			}
			return
		}
		if len(cd.ClientRefs) > len(b) {
			t.Fatal("more refs than bytes")
		}
	})
}
