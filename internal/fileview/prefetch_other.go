//go:build !amd64

package fileview

// Prefetch is a hint that does nothing on this architecture (on amd64 it
// asks the CPU to bring b's cache lines in).
func Prefetch(b []byte) {}
