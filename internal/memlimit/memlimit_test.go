package memlimit

import (
	"runtime"
	"runtime/debug"
	"testing"
)

// current is the soft limit in force.
func current() int64 { return debug.SetMemoryLimit(-1) }

// TestStartRespectsEnv: a GOMEMLIMIT or GOGC of the user's leaves the
// runtime alone.
func TestStartRespectsEnv(t *testing.T) {
	before := current()
	for _, name := range []string{"GOMEMLIMIT", "GOGC"} {
		env := func(k string) string {
			if k == name {
				return "1"
			}
			return ""
		}
		if Start(env) {
			t.Errorf("%s set: Start took over", name)
		}
		if got := current(); got != before {
			t.Errorf("%s set: limit moved %d -> %d", name, before, got)
		}
	}
}

// TestStartTracksLive: the limit is Floor for a small heap, rises to 1.5
// times a live heap past Floor (never below what is live, so the
// collector does not run back to back) and falls back when it is freed.
func TestStartTracksLive(t *testing.T) {
	defer stop()
	if !Start(func(string) string { return "" }) {
		t.Fatal("Start with a clean environment did nothing")
	}
	settle := func(want func(int64) bool) int64 {
		for range 200 { // the finalizer runs after a collection, on its own goroutine
			runtime.GC()
			if want(current()) {
				break
			}
			runtime.Gosched()
		}
		return current()
	}
	if got := settle(func(l int64) bool { return l == Floor }); got != Floor {
		t.Fatalf("small heap: limit %d, want Floor %d", got, Floor)
	}
	const live = 96 << 20
	keep := make([][]byte, 0, live>>20)
	for range live >> 20 {
		keep = append(keep, make([]byte, 1<<20))
	}
	if got := settle(func(l int64) bool { return l >= live*3/2 }); got < live*3/2 || got > live*2 {
		t.Errorf("%d MiB live: limit %d MiB, want about %d", live>>20, got>>20, live*3/2>>20)
	}
	runtime.KeepAlive(keep)
	keep = nil
	if got := settle(func(l int64) bool { return l == Floor }); got != Floor {
		t.Errorf("freed: limit %d MiB, want Floor", got>>20)
	}
}
