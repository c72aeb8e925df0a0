// Package testutil holds helpers shared by tests: finding the repository's
// testdata, reading fixture tarballs into memory (ReadTar, for tests that
// only need bytes) and unpacking them into a temp dir (Untar, for tests
// that scan a directory).
package testutil

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"testing"
)

// RepoRoot is the repository root (the directory holding go.mod).
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

// Testdata joins elem under the repository's testdata directory.
func Testdata(elem ...string) string {
	return filepath.Join(append([]string{RepoRoot(), "testdata"}, elem...)...)
}

// Untar unpacks a .tar.gz into a new temp dir and returns the dir.
func Untar(t testing.TB, tarball string) string {
	t.Helper()
	dir := t.TempDir()
	if err := UntarTo(tarball, dir); err != nil {
		t.Fatalf("untar %s: %v", tarball, err)
	}
	return dir
}

// ReadTar reads the regular files of a .tar.gz into memory, keyed by
// their slash-separated path in the archive (cleaned, without "./"):
// decoder tests take their bytes from here instead of unpacking to disk.
func ReadTar(t testing.TB, tarball string) map[string][]byte {
	t.Helper()
	f, err := os.Open(tarball)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		t.Fatalf("%s: %v", tarball, err)
	}
	out := map[string][]byte{}
	tr := tar.NewReader(gz)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatalf("%s: %v", tarball, err)
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatalf("%s: %s: %v", tarball, h.Name, err)
		}
		out[path.Clean(strings.TrimPrefix(h.Name, "./"))] = b
	}
}

// UntarTo unpacks a .tar.gz into dir (regular files and dirs only).
func UntarTo(tarball, dir string) error {
	f, err := os.Open(tarball)
	if err != nil {
		return err
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		return err
	}
	tr := tar.NewReader(gz)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		name := filepath.Clean(h.Name)
		if strings.HasPrefix(name, "..") || filepath.IsAbs(name) {
			continue
		}
		p := filepath.Join(dir, name)
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(p, 0o755); err != nil {
				return err
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				return err
			}
			out, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
			if err != nil {
				return err
			}
			if err := copySparse(out, tr, h.Size); err != nil {
				out.Close()
				return err
			}
			if err := out.Close(); err != nil {
				return err
			}
			_ = os.Chtimes(p, h.ModTime, h.ModTime)
		}
	}
}

// copySparse copies size bytes from r to the new file f, leaving holes
// for all-zero 64 KiB blocks: the RocketMQ 5.x fixtures hold a 38 MB timer
// wheel and a 160 MiB DLedger index file that are almost all zeros, and
// writing them out in full made every unpack slow.
func copySparse(f *os.File, r io.Reader, size int64) error {
	buf := make([]byte, 64<<10)
	var off int64
	for off < size {
		n, err := io.ReadFull(r, buf[:min(int64(len(buf)), size-off)])
		if n > 0 && !allZero(buf[:n]) {
			if _, werr := f.WriteAt(buf[:n], off); werr != nil {
				return werr
			}
		}
		off += int64(n)
		if err != nil {
			if err == io.ErrUnexpectedEOF || err == io.EOF {
				return io.ErrUnexpectedEOF
			}
			return err
		}
	}
	return f.Truncate(size)
}

var zeros64k [64 << 10]byte

func allZero(b []byte) bool { return bytes.Equal(b, zeros64k[:len(b)]) }

// TreeHash returns path -> sha256 of every regular file under dir, so a
// test can assert that a read-only command changed nothing.
func TreeHash(t testing.TB, dir string) map[string]string {
	t.Helper()
	out, err := HashTree(dir)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// HashTree is TreeHash without a testing.TB.
func HashTree(dir string) (map[string]string, error) {
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		s := sha256.Sum256(b)
		rel, _ := filepath.Rel(dir, p)
		out[filepath.ToSlash(rel)] = hex.EncodeToString(s[:])
		return nil
	})
	return out, err
}

// TreeHashDirs is TreeHash plus every directory below dir, as "rel/" ->
// its mode, for tests that check a repair also left the directories (and
// their permissions) as they were.
func TreeHashDirs(t testing.TB, dir string) map[string]string {
	t.Helper()
	out := TreeHash(t, dir)
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() || p == dir {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		out[filepath.ToSlash(rel)+"/"] = fi.Mode().String()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// SameTree fails the test when two TreeHash results differ.
func SameTree(t testing.TB, before, after map[string]string) {
	t.Helper()
	var diffs []string
	for k, v := range before {
		if after[k] != v {
			diffs = append(diffs, "changed or removed: "+k)
		}
	}
	for k := range after {
		if _, ok := before[k]; !ok {
			diffs = append(diffs, "added: "+k)
		}
	}
	sort.Strings(diffs)
	if len(diffs) > 0 {
		t.Fatalf("tree changed:\n%s", strings.Join(diffs, "\n"))
	}
}

// OpenFiles counts this process's open descriptors whose target names
// contain substr (/proc/self/fd), for tests that check temp files are
// closed after a run; it skips where /proc/self/fd is not there.
func OpenFiles(t testing.TB, substr string) int {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip("no /proc/self/fd")
	}
	n := 0
	for _, fd := range fds {
		if l, err := os.Readlink(filepath.Join("/proc/self/fd", fd.Name())); err == nil && strings.Contains(l, substr) {
			n++
		}
	}
	return n
}
