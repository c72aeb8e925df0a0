package repair

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/storectl/storectl/internal/testutil"
)

// keepMtime runs fn on path and puts the mtime back, so only the intended
// property of the file moves.
func keepMtime(t *testing.T, path string, fn func(f *os.File)) {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	fn(f)
	f.Close()
	if err := os.Chtimes(path, fi.ModTime(), fi.ModTime()); err != nil {
		t.Fatal(err)
	}
}

// TestApplyRefusesStale: any moved precondition gives ErrStale, nothing is
// written, not even the backup dir.
func TestApplyRefusesStale(t *testing.T) {
	plan := func(t *testing.T, data string, o SnapshotOptions) *Plan {
		return buildPlan(t, data, opCase{build: func(t *testing.T, data string) []Action {
			return []Action{
				{Op: OpZeroRange, Path: cl, Offset: 100, Length: 50},
				{Op: OpWriteRange, Path: small, Offset: 0, Length: 4, Source: stageFile(t, data, "s", []byte("abcd"))},
			}
		}}, o)
	}
	tests := []struct {
		name     string
		skip     bool // plan without whole-file hashes
		mutate   func(t *testing.T, data string)
		wantWhat string
	}{
		{"byte in range", true, func(t *testing.T, data string) {
			keepMtime(t, filepath.Join(data, cl), func(f *os.File) { f.WriteAt([]byte{0}, 120) })
		}, "range 100+50 sha256"},
		{"byte outside range, whole hash", false, func(t *testing.T, data string) {
			keepMtime(t, filepath.Join(data, cl), func(f *os.File) { f.WriteAt([]byte{0}, 5000) })
		}, "sha256"},
		{"size", true, func(t *testing.T, data string) {
			keepMtime(t, filepath.Join(data, cl), func(f *os.File) { f.WriteAt([]byte{1}, 3*testChunk+1234) })
		}, "size"},
		{"shrunk below the range", true, func(t *testing.T, data string) {
			keepMtime(t, filepath.Join(data, cl), func(f *os.File) { f.Truncate(120) })
		}, "size"},
		{"mtime only", false, func(t *testing.T, data string) {
			os.Chtimes(filepath.Join(data, small), time.Now(), time.Now())
		}, "mtime_ns"},
		{"file removed", false, func(t *testing.T, data string) {
			os.Remove(filepath.Join(data, small))
		}, "existence"},
		{"staged source changed", false, func(t *testing.T, data string) {
			os.WriteFile(filepath.Join(filepath.Dir(data), "stage-s"), []byte("abcX"), 0o600)
		}, "staged source sha256"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data := makeTree(t)
			p := plan(t, data, SnapshotOptions{SkipWholeFile: tt.skip})
			tt.mutate(t, data)
			before := testutil.TreeHashDirs(t, data)
			rep, err := Apply(context.Background(), p, ApplyOptions{BackupDir: backupDir(data)})
			var se *StaleError
			if !errors.Is(err, ErrStale) || !errors.As(err, &se) || se.What != tt.wantWhat || rep != nil {
				t.Fatalf("err %v (report %v), want ErrStale on %q", err, rep, tt.wantWhat)
			}
			testutil.SameTree(t, before, testutil.TreeHashDirs(t, data))
			if _, err := os.Stat(backupDir(data)); !os.IsNotExist(err) {
				t.Fatalf("backup dir exists after a refusal: %v", err)
			}
		})
	}
}

func TestApplyBackupDirRefused(t *testing.T) {
	data := makeTree(t)
	outside := filepath.Join(filepath.Dir(data), "link")
	if err := os.Symlink(filepath.Join(data, "queue"), outside); err != nil {
		t.Fatal(err)
	}
	full := filepath.Join(filepath.Dir(data), "full")
	os.Mkdir(full, 0o700)
	os.WriteFile(filepath.Join(full, ManifestName), []byte("someone else's"), 0o600)
	for _, dir := range []string{data, filepath.Join(data, "bk"), filepath.Join(data, "queue", "x", "y"), filepath.Join(outside, "bk"), full} {
		before := testutil.TreeHashDirs(t, filepath.Dir(data))
		_, err := Apply(context.Background(), buildPlan(t, data, opCases[0], SnapshotOptions{}), ApplyOptions{BackupDir: dir})
		if !errors.Is(err, ErrBackupDir) {
			t.Fatalf("backup dir %s: err %v, want ErrBackupDir", dir, err)
		}
		testutil.SameTree(t, before, testutil.TreeHashDirs(t, filepath.Dir(data)))
	}
}

func TestApplyMaxRemoveBytes(t *testing.T) {
	data := makeTree(t)
	before := testutil.TreeHashDirs(t, data)
	p := buildPlan(t, data, opCases[0], SnapshotOptions{}) // zeroes 20 bytes
	if p.LostBytes() != 20 {
		t.Fatalf("LostBytes = %d", p.LostBytes())
	}
	if _, err := Apply(context.Background(), p, ApplyOptions{BackupDir: backupDir(data), MaxRemoveBytes: 19}); !errors.Is(err, ErrLimit) {
		t.Fatalf("err %v, want ErrLimit", err)
	}
	testutil.SameTree(t, before, testutil.TreeHashDirs(t, data))
	if _, err := Apply(context.Background(), p, ApplyOptions{BackupDir: backupDir(data), MaxRemoveBytes: 20}); err != nil {
		t.Fatal(err)
	}
}

func TestPlanValidate(t *testing.T) {
	data := makeTree(t)
	os.Symlink(filepath.Join(data, small), filepath.Join(data, "link.bin"))
	bad := [][]Action{
		{{Op: OpZeroRange, Path: "../x", Offset: 0, Length: 1}},
		{{Op: OpZeroRange, Path: "link.bin", Offset: 0, Length: 1}},
		{{Op: OpZeroRange, Path: small, Offset: 90, Length: 11}},
		{{Op: OpZeroRange, Path: small, Offset: 0, Length: 0}},
		{{Op: OpWriteRange, Path: small, Offset: 0, Length: 3, Data: []byte("ab")}},
		{{Op: OpTruncateFile, Path: small, NewSize: 101}},
		{{Op: OpResizeFile, Path: small, NewSize: MaxNewSize + 1}},
		{{Op: OpZeroRange, Path: "absent", Offset: 0, Length: 1}},
		{{Op: "shred", Path: small}},
		{{Op: OpZeroRange, Path: small, Offset: 0, Length: 10, Data: []byte("x")}},
		{{Op: OpZeroRange, Path: small, Offset: 0, Length: 10}, {Op: OpZeroRange, Path: small, Offset: 9, Length: 5}},
		{{Op: OpZeroRange, Path: small, Offset: 50, Length: 10}, {Op: OpTruncateFile, Path: small, NewSize: 55}},
		{{Op: OpRemoveFile, Path: small}, {Op: OpZeroRange, Path: small, Offset: 0, Length: 1}},
		{{Op: OpTruncateFile, Path: small, NewSize: 50}, {Op: OpResizeFile, Path: small, NewSize: 60}},
		{{ID: "../evil", Op: OpRemoveFile, Path: small}},
		{{ID: "x", Op: OpRemoveFile, Path: small}, {ID: "x", Op: OpRemoveFile, Path: idx}},
	}
	for i, acts := range bad {
		p, _ := NewPlan(data, "test", fixedMtime)
		var err error
		for _, a := range acts {
			if err = p.Add(a, SnapshotOptions{}); err != nil {
				break
			}
		}
		if !errors.Is(err, ErrInvalidPlan) {
			t.Errorf("case %d %+v: err %v, want ErrInvalidPlan", i, acts, err)
		}
	}
}
