package main

import (
	"bytes"
	"fmt"
	"os"
	"runtime/metrics"
	"runtime/pprof"
	"runtime/trace"
	"time"
)

// startProfiles starts the developer profiles named by STORECTL_CPUPROFILE,
// STORECTL_TRACE (runtime/trace: which goroutine ran when) and
// STORECTL_MEMPROFILE (files written at exit; see `make bench` and
// README "Speed"). They are environment-only so they never show in --help:
// operators have no use for them, and they cost nothing when unset.
// The returned function stops the CPU profile and writes the heap profile.
func startProfiles(getenv func(string) string) func() {
	var stops []func()
	if path := getenv("STORECTL_CPUPROFILE"); path != "" {
		f, err := os.Create(path)
		if err == nil && pprof.StartCPUProfile(f) == nil {
			stops = append(stops, func() { pprof.StopCPUProfile(); f.Close() })
		} else {
			fmt.Fprintf(os.Stderr, "storectl: STORECTL_CPUPROFILE: cannot profile to %s\n", path)
		}
	}
	if path := getenv("STORECTL_TRACE"); path != "" {
		f, err := os.Create(path)
		if err == nil && trace.Start(f) == nil {
			stops = append(stops, func() { trace.Stop(); f.Close() })
		} else {
			fmt.Fprintf(os.Stderr, "storectl: STORECTL_TRACE: cannot trace to %s\n", path)
		}
	}
	if path := getenv("STORECTL_MEMPROFILE"); path != "" {
		peak := watchPeakHeap()
		stops = append(stops, func() {
			prof := peak()
			if err := os.WriteFile(path, prof, 0o644); err != nil {
				fmt.Fprintf(os.Stderr, "storectl: STORECTL_MEMPROFILE: %v\n", err)
			}
		})
	}
	return func() {
		for _, stop := range stops {
			stop()
		}
	}
}

// watchPeakHeap samples the live heap every 10 ms and keeps the heap
// profile taken when it was largest (in use at the peak is what matters
// for peak RSS; a profile at exit shows everything freed). The returned
// function stops the watch and returns that profile.
func watchPeakHeap() func() []byte {
	done := make(chan struct{})
	stopped := make(chan []byte)
	go func() {
		sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
		var best uint64
		var prof []byte
		take := func() {
			metrics.Read(sample)
			if v := sample[0].Value.Uint64(); v > best+best/20 || prof == nil {
				best = v
				var b bytes.Buffer
				if pprof.Lookup("heap").WriteTo(&b, 0) == nil {
					prof = b.Bytes()
				}
			}
		}
		t := time.NewTicker(10 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				take()
			case <-done:
				stopped <- prof
				return
			}
		}
	}()
	return func() []byte { close(done); return <-stopped }
}
