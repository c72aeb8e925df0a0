package rabbitmq

import (
	"math/rand/v2"
	"testing"
)

// TestInFileDup: the reused slot tables answer as a map of the ids does,
// on lists of every size up to a few thousand (tables grown, shrunk and
// reused), with and without a planted second copy, ids alike in their
// first bytes included.
func TestInFileDup(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	dups := 0
	for i := range 3000 {
		n := r.IntN(40)
		if i%10 == 0 {
			n = r.IntN(5000)
		}
		recs := make([]HazardRecord, n)
		for k := range recs {
			if r.IntN(2) == 0 { // alike but for the last byte
				recs[k].MsgID[15] = byte(r.UintN(256))
				recs[k].MsgID[14] = byte(k >> 8)
				continue
			}
			for j := range recs[k].MsgID {
				recs[k].MsgID[j] = byte(r.UintN(256))
			}
		}
		if n > 1 && r.IntN(2) == 0 {
			recs[r.IntN(n)].MsgID = recs[r.IntN(n)].MsgID
		}
		seen := map[[16]byte]bool{}
		want := false
		for _, rec := range recs {
			want = want || seen[rec.MsgID]
			seen[rec.MsgID] = true
		}
		if got := inFileDup(recs); got != want {
			t.Fatalf("case %d (%d ids): inFileDup %v, want %v", i, n, got, want)
		}
		if want {
			dups++
		}
	}
	if dups < 500 {
		t.Fatalf("vacuous: %d cases with a duplicate", dups)
	}
}
