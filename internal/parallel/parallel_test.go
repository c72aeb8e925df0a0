package parallel

import (
	"sync/atomic"
	"testing"
	"time"
)

func TestForRunsEachIndexOnceWithinJobs(t *testing.T) {
	for _, c := range []struct{ n, jobs, wantMax int }{
		{0, 4, 0}, {1, 4, 1}, {7, 1, 1}, {7, 0, 1}, {7, -3, 1}, {50, 3, 3}, {3, 8, 3},
	} {
		seen := make([]int32, c.n)
		var running, peak atomic.Int32
		For(c.n, c.jobs, func(i int) {
			r := running.Add(1)
			for {
				p := peak.Load()
				if r <= p || peak.CompareAndSwap(p, r) {
					break
				}
			}
			atomic.AddInt32(&seen[i], 1)
			for range 1000 { // long enough for other workers to overlap
				_ = running.Load()
			}
			running.Add(-1)
		})
		for i, s := range seen {
			if s != 1 {
				t.Errorf("n=%d jobs=%d: index %d ran %d times", c.n, c.jobs, i, s)
			}
		}
		if got := int(peak.Load()); got > c.wantMax {
			t.Errorf("n=%d jobs=%d: %d calls at once, want at most %d", c.n, c.jobs, got, c.wantMax)
		}
	}
}

// TestForTurnsAdvance is the property the RabbitMQ store scan's ordered
// phase needs: fn(i) waits until fn(i-1) has passed its turn. Were indexes
// handed out in any other order, fewer goroutines than indexes would all
// wait on turns no running call can give, and For would never return.
func TestForTurnsAdvance(t *testing.T) {
	const n = 200
	for _, jobs := range []int{1, 2, 3, 8} {
		turn := make([]chan struct{}, n+1)
		for i := range turn {
			turn[i] = make(chan struct{})
		}
		close(turn[0])
		var order []int
		done := make(chan struct{})
		go func() {
			For(n, jobs, func(i int) {
				<-turn[i]
				order = append(order, i) // serialised by the turns
				close(turn[i+1])
			})
			close(done)
		}()
		select {
		case <-done:
		case <-time.After(30 * time.Second): // a hang guard, not a timing
			t.Fatalf("jobs=%d: For did not return: turns stuck", jobs)
		}
		for k, i := range order {
			if k != i {
				t.Fatalf("jobs=%d: turn %d ran as %d", jobs, k, i)
			}
		}
		if len(order) != n {
			t.Fatalf("jobs=%d: %d turns ran, want %d", jobs, len(order), n)
		}
	}
}
