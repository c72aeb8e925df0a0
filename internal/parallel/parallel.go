// Package parallel runs the per-file work of a scan on a bounded number of
// goroutines.
package parallel

import "sync"

// For calls fn(i) for every i in [0, n) on at most jobs goroutines (at
// least one) and returns when every call has returned. Indexes are handed
// out in increasing order: when a goroutine takes i, every index below i
// has been taken, so calls that wait for their predecessor's turn (files
// whose ordered phase runs in file order) always advance.
func For(n, jobs int, fn func(i int)) {
	if n <= 0 {
		return
	}
	work := make(chan int)
	var wg sync.WaitGroup
	for range min(max(jobs, 1), n) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				fn(i)
			}
		}()
	}
	for i := range n {
		work <- i
	}
	close(work)
	wg.Wait()
}
