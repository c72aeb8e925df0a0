// Package memlimit keeps the Go heap of a storectl process near what it
// holds live. With the garbage collector's default (GOGC=100) the heap
// grows to twice the live heap before a collection, and on a loaded host,
// where the collector's marking gets little CPU, well past that: a
// RabbitMQ scan of 1 GiB of small messages holding about 35 MB live peaked
// anywhere from 74 to 137 MiB of heap. Start sets a soft memory limit
// (runtime/debug.SetMemoryLimit) of Floor or 1.5 times the live heap
// after the last collection, whichever is larger, and moves it after
// every collection, so the heap stays within half the live heap of it
// (or within Floor) and the limit never sits below what is live (a fixed
// limit under the live heap would make the collector run back to back).
// A user's GOMEMLIMIT or GOGC in the environment turns it off.
package memlimit

import (
	"math"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
)

// Floor is the smallest limit set: below it the default pacing stands (a
// small heap is collected often enough as it is).
const Floor = 64 << 20

// headroom is the limit over the live heap: 3/2, as GOGC=50 would give.
func limitFor(live uint64) int64 {
	return int64(max(Floor, live+live/2))
}

var once sync.Once

// Start sets the soft limit and keeps it moving with the live heap,
// unless getenv says GOMEMLIMIT or GOGC is set. It returns whether it
// did.
func Start(getenv func(string) string) bool {
	if getenv("GOMEMLIMIT") != "" || getenv("GOGC") != "" {
		return false
	}
	once.Do(func() {
		debug.SetMemoryLimit(Floor)
		arm()
	})
	return true
}

// Stop puts back the runtime's default (no limit); for tests.
func stop() {
	debug.SetMemoryLimit(math.MaxInt64)
}

// tick is garbage as soon as it is made: its finalizer runs after the
// collection that found it so, moves the limit and makes the next one.
type tick struct{ _ [16]byte }

var sample = []metrics.Sample{{Name: "/gc/heap/live:bytes"}}

func arm() {
	runtime.SetFinalizer(&tick{}, func(*tick) {
		metrics.Read(sample)
		if sample[0].Value.Kind() == metrics.KindUint64 {
			debug.SetMemoryLimit(limitFor(sample[0].Value.Uint64()))
		}
		arm()
	})
}
