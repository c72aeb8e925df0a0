package testutil

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// OpenFDsUnder counts this process's open descriptors on files in dir,
// read from /proc/self/fd (an unlinked temp file shows as
// "dir/name (deleted)"): the tests that a spill's temp files are closed
// after a run use it. Without /proc the test is skipped, visibly.
func OpenFDsUnder(t testing.TB, dir string) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip("no /proc/self/fd to count open temp files:", err)
	}
	n := 0
	for _, e := range ents {
		if l, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name())); err == nil && strings.HasPrefix(l, dir+string(filepath.Separator)) {
			n++
		}
	}
	return n
}
