package rabbitmq

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
)

// TestGapProtect: simGap.protect lists each protected record once, in the
// order first seen, as the search of the list it replaced (appendNew over
// the "id@offset" strings) did, for victims repeated across hazards and
// rounds (a generation-1 stop's victims are every later record).
func TestGapProtect(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for trial := range 200 {
		var recs []simRec
		for i := range 1 + r.IntN(40) {
			var id [16]byte
			id[0], id[1] = byte(i), byte(r.IntN(3)) // ids repeat at other offsets too
			recs = append(recs, simRec{id: id, off: int64(r.IntN(5)) * 100})
		}
		var g simGap
		var want []string
		for range 1 + r.IntN(300) {
			v := recs[r.IntN(len(recs))]
			g.protect(v)
			want = appendNew(want, fmt.Sprintf("%s@%d", hexID(v.id), v.off))
		}
		if !reflect.DeepEqual(g.protects, want) {
			t.Fatalf("trial %d: protects %v, want %v", trial, g.protects, want)
		}
	}
}

// TestProtectsNote: an action's note names up to protectsNoteMax
// protected records as %v does, and a longer list by its first ones, its
// last and the count, so the note does not grow with the records.
func TestProtectsNote(t *testing.T) {
	var p []string
	for i := range 10000 {
		p = append(p, fmt.Sprintf("%032x@%d", i, i*200))
		got := protectsNote(p)
		if len(p) <= protectsNoteMax {
			if want := fmt.Sprint(p); got != want {
				t.Fatalf("%d records: %q, want %q", len(p), got, want)
			}
			continue
		}
		if len(got) > 256 || !strings.Contains(got, p[0]) || !strings.Contains(got, p[len(p)-1]) || !strings.Contains(got, fmt.Sprintf("%d records", len(p))) {
			t.Fatalf("%d records: %q", len(p), got)
		}
	}
}
