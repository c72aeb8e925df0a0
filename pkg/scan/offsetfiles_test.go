package scan

import (
	"errors"
	"fmt"
	"io/fs"
	"math/rand"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
)

// TestOffsetFiles builds a dir of hostile entries around a few good files
// and checks OffsetFiles returns exactly the good ones, by base, with
// their sizes. The expected bases come from strconv, not from the parser
// under test.
func TestOffsetFiles(t *testing.T) {
	dir := t.TempDir()
	good := []string{
		"00000000000000000000",
		"00000000001073741824",
		"00000000000000001000",
		"09223372036854775807", // max int64
		"00000000000000000999",
	}
	rand.New(rand.NewSource(1)).Shuffle(len(good), func(i, j int) { good[i], good[j] = good[j], good[i] })
	size := map[string]int64{}
	for i, n := range good {
		size[n] = int64(7 * (i + 1))
		if err := os.WriteFile(filepath.Join(dir, n), make([]byte, size[n]), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	bad := []string{
		"0000000000000000000",   // 19 digits
		"000000000000000000000", // 21 digits
		"0000000000000000000a",
		"+0000000000000000001",
		"-0000000000000000001",
		" 0000000000000000001",
		"0000000000000000001 ",
		"09223372036854775808", // int64 overflow
		"99999999999999999999",
		"00000000000000000001.tmp",
		"０0000000000000000001", // full-width digit
	}
	for _, n := range bad {
		if err := os.WriteFile(filepath.Join(dir, n), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// Good names on entries that are not regular files.
	if err := os.Mkdir(filepath.Join(dir, "00000000000000000002"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(good[0], filepath.Join(dir, "00000000000000000003")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("nowhere", filepath.Join(dir, "00000000000000000004")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "00000000000000000005"), 0o644); err != nil {
		t.Fatal(err)
	}

	got, err := OffsetFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(good) {
		t.Fatalf("got %d files, want %d: %+v", len(got), len(good), got)
	}
	seen := map[string]bool{}
	for i, f := range got {
		want, err := strconv.ParseInt(f.Name, 10, 64)
		if err != nil || size[f.Name] == 0 {
			t.Fatalf("file %d: %q is not one of the good files", i, f.Name)
		}
		if seen[f.Name] {
			t.Fatalf("%q listed twice", f.Name)
		}
		seen[f.Name] = true
		if f.Base != want || f.Size != size[f.Name] || f.Path != filepath.Join(dir, f.Name) {
			t.Errorf("%q: got %+v, want base %d size %d", f.Name, f, want, size[f.Name])
		}
		if i > 0 && got[i-1].Base >= f.Base {
			t.Errorf("not sorted by base: %d then %d", got[i-1].Base, f.Base)
		}
	}
}

func TestOffsetFilesDirErrors(t *testing.T) {
	dir := t.TempDir()
	if _, err := OffsetFiles(filepath.Join(dir, "missing")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing dir: %v, want fs.ErrNotExist", err)
	}
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := OffsetFiles(file); err == nil {
		t.Errorf("a file as dir: %+v, want an error", got)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := OffsetFiles(fifo); err == nil { // must fail, not block
		t.Errorf("a FIFO as dir: %+v, want an error", got)
	}
	empty := filepath.Join(dir, "empty")
	if err := os.Mkdir(empty, 0o755); err != nil {
		t.Fatal(err)
	}
	if got, err := OffsetFiles(empty); err != nil || len(got) != 0 {
		t.Errorf("empty dir: %+v %v", got, err)
	}
}

// TestOffsetFilesMany lists 200 files of random bases: none lost, none
// added, all in base order.
func TestOffsetFilesMany(t *testing.T) {
	dir := t.TempDir()
	r := rand.New(rand.NewSource(2))
	want := map[int64]bool{}
	for len(want) < 200 {
		b := r.Int63()
		if want[b] {
			continue
		}
		want[b] = true
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("%020d", b)), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := OffsetFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("got %d, want %d", len(got), len(want))
	}
	for i, f := range got {
		if !want[f.Base] {
			t.Errorf("unexpected base %d", f.Base)
		}
		if i > 0 && got[i-1].Base >= f.Base {
			t.Errorf("order: %d then %d", got[i-1].Base, f.Base)
		}
	}
}
