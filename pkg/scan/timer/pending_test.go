package timer

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/storectl/storectl/pkg/scan"
)

// TestPendingCache: with room for only 3 pending units (the rest read
// again from the timerlog and the commitlog when the dequeue reaches
// them) the scan gives what it gives keeping every one, on T1-T3.
func TestPendingCache(t *testing.T) {
	for _, c := range []struct {
		ds    string
		nowMs int64
	}{{"t1-clean", 1796163834084}, {"t2-kill", 1796163902000}, {"t3-cltrunc", 1796163964732}} {
		t.Run(c.ds, func(t *testing.T) {
			store := fixture(t, c.ds)
			run := func(n int) (*scan.Result, []byte) {
				res, err := Scan(context.Background(), Config{Root: store, RecoveryEnd: -1, Now: time.UnixMilli(c.nowMs), PendingCache: n}, scan.Options{})
				if err != nil {
					t.Fatal(err)
				}
				b, _ := json.Marshal(res)
				return res, b
			}
			all, want := run(0)
			_, got := run(3)
			if !bytes.Equal(got, want) {
				t.Errorf("with 3 pending units kept:\n%s\nwith all:\n%s", got, want)
			}
			rc := all.Extra["timer"].(*Summary).Recovery
			if n := rc.Restore + rc.Lost + rc.Duplicates + rc.Delivered; n <= 3 {
				t.Fatalf("only %d outcomes: the small cache was not exercised", n)
			}
		})
	}
}

// TestDequeueVisit: the chain's visited set (a list, then a map past
// dequeueSeenList offsets) says each offset is new once, then seen, over
// chains shorter and longer than the list, reused from one to the next.
func TestDequeueVisit(t *testing.T) {
	var d dequeueScratch
	for _, n := range []int{1, 3, dequeueSeenList, dequeueSeenList + 1, 100, 2} {
		d.seen = d.seen[:0]
		clear(d.seenMap)
		for i := range n {
			if d.visit(int64(i * 52)) {
				t.Fatalf("chain of %d: offset %d seen before it was visited", n, i*52)
			}
		}
		for i := range n {
			if !d.visit(int64(i * 52)) {
				t.Fatalf("chain of %d: offset %d not seen after it was visited", n, i*52)
			}
		}
		if d.visit(-7) {
			t.Fatalf("chain of %d: an offset never visited was seen", n)
		}
	}
}
