package rabbitmq

import (
	"fmt"
	"math/rand/v2"
	"reflect"
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
