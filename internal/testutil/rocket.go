package testutil

import (
	"os"
	"path/filepath"
	"testing"
)

// RecoverFromFirstFile makes the RocketMQ store at root recover from its
// first commitlog file, for tests that damage an early file and need the
// broker's recovery to walk through it. After a clean shutdown the
// broker's recoverNormally starts at the third commitlog file from the
// last (4.9.7) or at the last one the consume queues reach (5.3.3) and
// never reads a damaged earlier file; an abort file with a zero checkpoint
// makes recoverAbnormally start at file 0 (isMappedFileMatchedRecover
// matches no file), so the walk reaches it.
func RecoverFromFirstFile(t testing.TB, root string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(root, "abort"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "checkpoint"), make([]byte, 4096), 0o644); err != nil {
		t.Fatal(err)
	}
}
