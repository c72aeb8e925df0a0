package fileview

//go:noescape
func prefetch(p *byte, n int)

// Prefetch asks the CPU to bring the cache lines of b into its caches
// ahead of their use (PREFETCHT0): a hint with no visible effect. A walk
// over a mapping that reads its records a few KiB ahead of where it
// decodes keeps the memory busy while it computes, instead of waiting for
// each record's first touch (the decode of a mapped file is memory-bound:
// docs/performance.md).
func Prefetch(b []byte) {
	if len(b) > 0 {
		prefetch(&b[0], len(b))
	}
}
