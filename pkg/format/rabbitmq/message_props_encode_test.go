package rabbitmq_test

import (
	"bytes"
	"testing"

	gen "github.com/storectl/storectl/internal/gen/rabbitmq"
	"github.com/storectl/storectl/internal/testutil"
	rfmt "github.com/storectl/storectl/pkg/format/rabbitmq"
)

// fixtureProps are the property lists of the real fixtures' records.
func fixtureProps(t testing.TB) [][]byte {
	recs, _ := gen.FixtureRecords(t, testutil.Testdata())
	var out [][]byte
	for _, r := range recs {
		if m, err := rfmt.DecodeMessage(r[24:len(r)-1], 0); err == nil && m.Content != nil && len(m.Content.PropertiesBin) > 0 {
			out = append(out, m.Content.PropertiesBin)
		}
	}
	return out
}

// TestAppendBasicPropertiesRoundTrip: every property list RabbitMQ wrote
// in the fixtures decodes and re-encodes to its own bytes.
func TestAppendBasicPropertiesRoundTrip(t *testing.T) {
	ps := fixtureProps(t)
	if len(ps) == 0 {
		t.Fatal("no fixture property lists")
	}
	for _, b := range ps {
		p, err := rfmt.DecodeBasicProperties(b, 0)
		if err != nil {
			t.Fatal(err)
		}
		re, err := rfmt.AppendBasicProperties(nil, p)
		if err != nil || !bytes.Equal(re, b) {
			t.Fatalf("re-encoded % x (%v), stored % x", re, err, b)
		}
	}
	t.Logf("%d property lists re-encoded byte for byte", len(ps))
}

func FuzzAppendBasicProperties(f *testing.F) {
	for i, b := range fixtureProps(f) {
		if i > 20 {
			break
		}
		f.Add(b)
	}
	f.Add([]byte{0x20, 0x00, 0, 0, 0, 12, 1, 'a', 'A', 0, 0, 0, 4, 'b', 1, 't', 1})
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := rfmt.DecodeBasicProperties(b, 0)
		if err != nil {
			return
		}
		re, err := rfmt.AppendBasicProperties(nil, p)
		if err != nil {
			t.Fatalf("decoded properties do not encode: %v", err)
		}
		p2, err := rfmt.DecodeBasicProperties(re, 0)
		if err != nil {
			t.Fatalf("re-encoded properties do not decode: %v", err)
		}
		re2, _ := rfmt.AppendBasicProperties(nil, p2)
		if !bytes.Equal(re, re2) {
			t.Fatal("encoding is not stable")
		}
	})
}
