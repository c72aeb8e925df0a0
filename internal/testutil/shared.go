package testutil

import (
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// shared holds the fixtures unpacked once per test binary (SharedUntar).
var shared struct {
	mu   sync.Mutex
	root string
	dirs map[string]string
}

// SharedUntar unpacks tarball once per test binary and returns the dir;
// later calls with the same tarball return the same dir. Tests must not
// change it (copy it first: CopyTree). A package using it removes the
// dirs in TestMain with RemoveShared.
func SharedUntar(t testing.TB, tarball string) string {
	t.Helper()
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if d, ok := shared.dirs[tarball]; ok {
		return d
	}
	if shared.root == "" {
		r, err := os.MkdirTemp("", "storectl-fixtures-")
		if err != nil {
			t.Fatal(err)
		}
		shared.root, shared.dirs = r, map[string]string{}
	}
	d, err := os.MkdirTemp(shared.root, "f")
	if err != nil {
		t.Fatal(err)
	}
	if err := UntarTo(tarball, d); err != nil {
		t.Fatalf("untar %s: %v", tarball, err)
	}
	shared.dirs[tarball] = d
	return d
}

// RemoveShared deletes what SharedUntar unpacked.
func RemoveShared() {
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.root != "" {
		os.RemoveAll(shared.root)
		shared.root, shared.dirs = "", nil
	}
}

// CopyTree copies the regular files and dirs under src into a new temp
// dir and returns it (for damaging a copy of a shared fixture).
func CopyTree(t testing.TB, src string) string {
	t.Helper()
	dst := t.TempDir()
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		out := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(out, 0o755)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(out, b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}
