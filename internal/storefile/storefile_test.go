package storefile

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// TestNeverBlocks: a FIFO nobody writes to, in place of a file or a dir,
// is refused at once by every entry point (os.Open would block in the
// kernel until a writer appears).
func TestNeverBlocks(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "lock")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink("lock", link); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for name, fn := range map[string]func(string) error{
			"Open":         func(p string) error { f, err := Open(p); closeIf(f); return err },
			"OpenNoFollow": func(p string) error { f, err := OpenNoFollow(p); closeIf(f); return err },
			"ReadFile":     func(p string) error { _, err := ReadFile(p); return err },
			"ReadDir":      func(p string) error { _, err := ReadDir(p); return err },
		} {
			for _, p := range []string{fifo, link} {
				err := fn(p)
				var ne *NotRegularError
				if !errors.As(err, &ne) || !errors.Is(err, ErrNotRegular) {
					t.Errorf("%s(%s) = %v, want a *NotRegularError", name, filepath.Base(p), err)
				}
			}
		}
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("blocked on a FIFO")
	}
}

func closeIf(f *os.File) {
	if f != nil {
		f.Close()
	}
}

func TestSymlinks(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "00000000000000000000")
	if err := os.WriteFile(file, []byte("data"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(file, filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("missing", filepath.Join(dir, "dangling")); err != nil {
		t.Fatal(err)
	}
	ents, err := ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{"00000000000000000000": true, "link": true, "dangling": false}
	for _, e := range ents {
		if got := IsRegular(dir, e); got != want[e.Name()] {
			t.Errorf("IsRegular(%s) = %v", e.Name(), got)
		}
		if want[e.Name()] {
			fi, err := Info(dir, e)
			if err != nil || fi.Size() != 4 {
				t.Errorf("Info(%s) = %v, %v; want the target's 4 bytes", e.Name(), fi, err)
			}
		}
	}
	if f, err := Open(filepath.Join(dir, "link")); err != nil {
		t.Errorf("Open follows a link to a regular file: %v", err)
	} else {
		f.Close()
	}
	if _, err := OpenNoFollow(filepath.Join(dir, "link")); !errors.Is(err, ErrNotRegular) {
		t.Errorf("OpenNoFollow(link) = %v, want ErrNotRegular", err)
	}
	if _, err := ReadFileLimit(file, 3); !errors.Is(err, ErrTooLarge) {
		t.Errorf("ReadFileLimit over the limit = %v", err)
	}
	if b, err := ReadFileLimit(file, 4); err != nil || string(b) != "data" {
		t.Errorf("ReadFileLimit = %q, %v", b, err)
	}
}
