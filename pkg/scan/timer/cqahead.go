package timer

import "github.com/storectl/storectl/pkg/scan/cqueue"

// timerCQ is predict's first read: the timer topic's consume queue
// opened and cut to the commitlog's recovery end (Queue.Recovered, a walk
// of every unit of the queue). It needs only the recovery end, so Scan
// starts it on its own goroutine once that end is known (cqAhead), and it
// runs while checkTargets and the wheel checks run: on the two CPUs the
// commitlog scan leaves idle at its end, the scan's last steps are one
// goroutine's otherwise.
type timerCQ struct {
	q        *cqueue.Queue
	err      error // Open's
	min, max int64 // Recovered's, when q has files
	rerr     error // Recovered's
}

// openTimerCQ is what predict did in line: Open, then Recovered(end) when
// the queue has files.
func openTimerCQ(root string, end int64) *timerCQ {
	c := &timerCQ{}
	if c.q, c.err = cqueue.Open(root, Topic, 0); c.err != nil {
		return c
	}
	if len(c.q.Files) > 0 || len(c.q.Irregular) > 0 {
		c.min, c.max, c.rerr = c.q.Recovered(end)
	}
	return c
}

// cqAhead starts openTimerCQ for the recovery end s.end; predict takes its
// result (timerCQ), and closeCQ closes a queue predict did not get to.
func (s *scanner) cqAhead() {
	ch := make(chan *timerCQ, 1)
	root, end := s.cfg.Root, s.end
	go func() { ch <- openTimerCQ(root, end) }()
	s.cqCh = ch
}

// timerCQ waits for cqAhead's result, or reads the queue itself when
// nothing was started.
func (s *scanner) timerCQ() *timerCQ {
	if s.cqCh == nil {
		return openTimerCQ(s.cfg.Root, s.end)
	}
	c := <-s.cqCh
	s.cqCh = nil
	return c
}

// closeCQ waits for a cqAhead result predict did not take and closes it.
func (s *scanner) closeCQ() {
	if s.cqCh == nil {
		return
	}
	if c := <-s.cqCh; c.q != nil {
		c.q.Close()
	}
	s.cqCh = nil
}
