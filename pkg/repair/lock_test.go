package repair

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/storectl/storectl/pkg/scan"
)

// TestWriterLock: one writer at a time, the second told who holds it,
// every spelling of the dir meets at one lock, nothing is left beside the
// data dir once released, and a file a killed writer left behind is taken
// over.
func TestWriterLock(t *testing.T) {
	parent := t.TempDir()
	data := filepath.Join(parent, "store")
	if err := os.Mkdir(data, 0o755); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(parent, "alias")
	if err := os.Symlink("store", link); err != nil {
		t.Fatal(err)
	}
	a, err := LockDataDir(data, "storectl truncate --apply")
	if err != nil {
		t.Fatal(err)
	}
	_, err = LockDataDir(link, "storectl harden --apply")
	var le *LockedError
	if !errors.As(err, &le) || !errors.Is(err, ErrLocked) || !strings.Contains(le.Holder, "storectl truncate --apply") {
		t.Fatalf("second lock: %v, want a LockedError naming the holder", err)
	}
	if h := HolderOf(data); !strings.Contains(h, "truncate") {
		t.Fatalf("HolderOf = %q", h)
	}
	if err := a.Release(); err != nil {
		t.Fatal(err)
	}
	if ents, _ := os.ReadDir(parent); len(ents) != 2 {
		t.Fatalf("left beside the data dir after release: %v", ents)
	}
	if HolderOf(data) != "" {
		t.Fatal("HolderOf a free lock is not empty")
	}
	// A killed writer leaves the file; the kernel dropped its lock.
	p, _ := LockPath(data)
	if err := os.WriteFile(p, []byte("pid 1: killed\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	b, err := LockDataDir(data, "storectl undo --apply")
	if err != nil {
		t.Fatalf("a stale lock file blocks: %v", err)
	}
	b.Release()
	// A symlink planted as the lock file is never followed.
	target := filepath.Join(data, "checkpoint")
	os.WriteFile(target, []byte("store bytes"), 0o644)
	if err := os.Symlink(target, p); err != nil {
		t.Fatal(err)
	}
	if _, err := LockDataDir(data, "x"); err == nil {
		t.Fatal("locked through a symlink")
	}
	if b, _ := os.ReadFile(target); string(b) != "store bytes" {
		t.Fatalf("the link's target was written: %q", b)
	}
}

// TestStagePrefixShared: verify names a killed writer's staging files by
// scan.StagePrefix, which must be the prefix Apply uses.
func TestStagePrefixShared(t *testing.T) {
	if StagePrefix != scan.StagePrefix {
		t.Fatalf("repair.StagePrefix %q != scan.StagePrefix %q", StagePrefix, scan.StagePrefix)
	}
}
