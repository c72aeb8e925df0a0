package testutil

import (
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// ReadBytes returns the bytes this process has had read(2) and pread(2)
// return so far (/proc/self/io rchar), to measure what a call reads; the
// test skips where the kernel does not say.
func ReadBytes(t testing.TB) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/io")
	if err != nil {
		t.Skipf("no /proc/self/io: %v", err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "rchar: "); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Skip("no rchar in /proc/self/io")
	return 0
}

// HoleTail rewrites file p with its trailing zero bytes (from the first
// 4 KiB block they fill on) as a hole, as the RocketMQ broker's
// FileChannel.map leaves a consume queue file, and returns the hole's
// size; the test skips when the file system keeps no holes.
func HoleTail(t testing.TB, p string) int64 {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	keep := len(b)
	for keep > 0 && b[keep-1] == 0 {
		keep--
	}
	keep = (keep + 4095) &^ 4095
	if keep >= len(b) {
		return 0
	}
	if err := os.WriteFile(p, b[:keep], 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(p, int64(len(b))); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	if s, ok := st.Sys().(*syscall.Stat_t); !ok || s.Blocks*512 > int64(keep)+64<<10 {
		t.Skip("the file system keeps no holes")
	}
	return int64(len(b) - keep)
}
