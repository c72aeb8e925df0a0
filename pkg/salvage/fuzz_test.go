package salvage

import (
	"testing"

	gen "github.com/storectl/storectl/internal/gen/rabbitmq"
	"github.com/storectl/storectl/internal/testutil"
	rfmt "github.com/storectl/storectl/pkg/format/rabbitmq"
)

// FuzzPublishing: any stored property list either fails to decode or
// maps to an AMQP message and a JSON view without panicking. Seeds: the
// property lists of the 4.0 fixture's first records and hand-made
// headers of every field type.
func FuzzPublishing(f *testing.F) {
	recs, _ := gen.FixtureRecords(f, testutil.Testdata())
	for i, r := range recs {
		if i > 4 {
			break
		}
		if m, err := rfmt.DecodeMessage(r[24:len(r)-1], 0); err == nil && m.Content != nil {
			f.Add(m.Content.PropertiesBin)
		}
	}
	f.Add([]byte{0x20, 0x00, 0, 0, 0, 0})
	f.Add([]byte{0x20, 0x00, 0, 0, 0, 12, 1, 'a', 'A', 0, 0, 0, 4, 'b', 1, 't', 1})
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := Publishing(b, nil)
		if err != nil {
			return
		}
		if len(b) == 0 {
			return // no property list recorded: a message without properties
		}
		if p.DeliveryMode != 2 {
			t.Fatalf("delivery mode %d, want persistent", p.DeliveryMode)
		}
		bp, err := rfmt.DecodeBasicProperties(b, 0)
		if err != nil {
			t.Fatalf("Publishing accepted what the decoder rejects: %v", err)
		}
		_ = PropsJSON(&bp)
	})
}
