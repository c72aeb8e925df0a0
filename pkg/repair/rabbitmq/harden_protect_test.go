package rabbitmq

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"

	rscan "github.com/storectl/storectl/pkg/scan/rabbitmq"
)

// The tests of this package check every protected record and victim.
func init() { keepLists = true }

// TestGapProtect: sim.protect counts each protected record once and keeps
// the first rscan.InlineVictims in the order first seen and the last one
// seen, as the list it replaced (appendNew over the "id@offset" strings)
// had them, for victims repeated across hazards and rounds (a
// generation-1 stop's victims are every later record); each lists the
// whole set in file order. A dummy (not an original record) is not
// counted.
func TestGapProtect(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for trial := range 300 {
		s := &sim{}
		off := int64(0)
		for i := range 1 + r.IntN(200) {
			var id [16]byte
			id[0], id[1] = byte(i), byte(r.IntN(3))
			s.orig = append(s.orig, simRec{id: id, off: off, total: 100})
			off += 100 + int64(r.IntN(3))*10
		}
		var g simGap
		var want []string
		for range 1 + r.IntN(500) {
			v := s.orig[r.IntN(len(s.orig))]
			if r.IntN(10) == 0 {
				v = simRec{id: [16]byte{0xdd}, off: v.off, dummy: true} // same offset, not the record
				s.protect(&g, v)
				continue
			}
			s.protect(&g, v)
			want = appendNew(want, recName(v))
		}
		if g.prot.n != len(want) {
			t.Fatalf("trial %d: count %d, want %d", trial, g.prot.n, len(want))
		}
		var head []string
		for _, v := range g.prot.head {
			head = append(head, recName(v))
		}
		if n := min(len(want), rscan.InlineVictims); !reflect.DeepEqual(head, want[:n]) {
			t.Fatalf("trial %d: head %v, want %v", trial, head, want[:n])
		}
		if len(want) > 0 && recName(g.prot.last) != want[len(want)-1] {
			t.Fatalf("trial %d: last %s, want %s", trial, recName(g.prot.last), want[len(want)-1])
		}
		var all []string
		g.prot.each(s.orig, func(v simRec) { all = append(all, recName(v)) })
		sorted := slices.Clone(want)
		slices.SortFunc(sorted, func(a, b string) int {
			var x, y int64
			fmt.Sscanf(a[strings.IndexByte(a, '@')+1:], "%d", &x)
			fmt.Sscanf(b[strings.IndexByte(b, '@')+1:], "%d", &y)
			return int(x - y)
		})
		if !reflect.DeepEqual(all, sorted) {
			t.Fatalf("trial %d: each gave %v, want %v", trial, all, sorted)
		}
	}
}

// TestProtectsNote: an action's note names up to rscan.InlineVictims
// protected records as %v does, and more by the first ones, the last and
// the count, so the note does not grow with the records.
func TestProtectsNote(t *testing.T) {
	var p []string
	for i := range 10000 {
		p = append(p, fmt.Sprintf("%032x@%d", i, i*200))
		hr := HoleReport{Protects: p[:min(len(p), rscan.InlineVictims)], ProtectsCount: len(p)}
		if len(p) > rscan.InlineVictims {
			hr.LastProtected = p[len(p)-1]
		}
		got := protectsNote(&hr)
		if len(p) <= rscan.InlineVictims {
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
