package repair

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/storectl/storectl/internal/testutil"
)

// TestPlanValidateDirs: paths that leave the data dir (.., absolute, a
// symlink pointing outside or nowhere), parents that are files, remove-dir
// of what is not a plain dir, and plans whose paths nest inconsistently
// are refused with ErrInvalidPlan; a symlinked parent inside the data dir
// is accepted.
func TestPlanValidateDirs(t *testing.T) {
	data := makeTree(t)
	outside := filepath.Join(filepath.Dir(data), "outside")
	os.Mkdir(outside, 0o755)
	os.Symlink(outside, filepath.Join(data, "out"))
	os.Symlink(filepath.Join(data, "nowhere"), filepath.Join(data, "dang"))
	os.Symlink(filepath.Join(data, "queue"), filepath.Join(data, "qlink"))
	content := []byte("x")
	bad := [][]Action{
		{{Op: OpReplaceFile, Path: "../x", Data: content}},
		{{Op: OpReplaceFile, Path: "../data/new/x", Data: content}},
		{{Op: OpReplaceFile, Path: filepath.Join(data, "new/x"), Data: content}},
		{{Op: OpReplaceFile, Path: "new//x", Data: content}},
		{{Op: OpReplaceFile, Path: "out/x", Data: content}},
		{{Op: OpReplaceFile, Path: "out/new/x", Data: content}},
		{{Op: OpReplaceFile, Path: "dang/x", Data: content}},
		{{Op: OpReplaceFile, Path: "small.bin/x", Data: content}},
		{{Op: OpRemoveDir, Path: "."}},
		{{Op: OpRemoveDir, Path: ".."}},
		{{Op: OpRemoveDir, Path: "small.bin"}},
		{{Op: OpRemoveDir, Path: "absent"}},
		{{Op: OpRemoveDir, Path: "out"}},
		{{Op: OpRemoveDir, Path: "qlink"}},
		{{Op: OpRemoveDir, Path: "consumequeue/TopicA/1", Offset: 1}},
		{{Op: OpRemoveDir, Path: "queue"}, {Op: OpZeroRange, Path: idx, Offset: 0, Length: 1}},
		{{Op: OpRemoveDir, Path: "consumequeue/TopicA"}, {Op: OpReplaceFile, Path: "consumequeue/TopicA/2/x", Data: content}},
		{{Op: OpRemoveDir, Path: "consumequeue/TopicA/1"}, {Op: OpRemoveDir, Path: "consumequeue/TopicA/1"}},
		{{Op: OpReplaceFile, Path: "consumequeue/TopicB/0/x", Data: content}, {Op: OpReplaceFile, Path: "consumequeue/TopicB", Data: content}},
		{{Op: OpRemoveFile, Path: small}, {Op: OpReplaceFile, Path: "small.bin/x", Data: content}},
	}
	for i, acts := range bad {
		before := testutil.TreeHashDirs(t, data)
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
		testutil.SameTree(t, before, testutil.TreeHashDirs(t, data))
	}
	p, _ := NewPlan(data, "test", fixedMtime)
	if err := p.Add(Action{Op: OpReplaceFile, Path: "qlink/new/x", Data: content}, SnapshotOptions{}); err != nil {
		t.Fatalf("symlinked parent inside the data dir: %v", err)
	}
	if got := p.Actions[0].Pre.AbsentDirs; !slices.Equal(got, []string{"qlink/new"}) {
		t.Fatalf("absent dirs %q", got)
	}
	if outs, _ := os.ReadDir(outside); len(outs) != 0 {
		t.Fatalf("something was written outside the data dir: %v", outs)
	}
}

// dirsPlan creates consumequeue/TopicB/0 and removes TopicA/0 (after its
// file) and the empty TopicA/1.
func dirsPlan(t *testing.T, data string) *Plan {
	return buildPlan(t, data, opCase{build: func(t *testing.T, data string) []Action {
		return []Action{
			{Op: OpReplaceFile, Path: cqB0, Data: []byte("rebuilt")},
			{Op: OpRemoveFile, Path: cqA0},
			{Op: OpRemoveDir, Path: "consumequeue/TopicA/0"},
			{Op: OpRemoveDir, Path: "consumequeue/TopicA/1"},
		}
	}}, SnapshotOptions{})
}

// TestApplyRefusesStaleDirs: a dir recorded absent that appeared, a dir to
// remove that gained an entry, vanished or became a file, all give
// ErrStale before anything is written.
func TestApplyRefusesStaleDirs(t *testing.T) {
	tests := []struct {
		name, what string
		mutate     func(data string)
	}{
		{"absent dir created", "absent parent dirs", func(data string) { os.Mkdir(filepath.Join(data, "consumequeue/TopicB"), 0o755) }},
		{"absent dirs created", "absent parent dirs", func(data string) { os.MkdirAll(filepath.Join(data, "consumequeue/TopicB/0"), 0o755) }},
		{"dir to remove gained a file", "entries", func(data string) {
			os.WriteFile(filepath.Join(data, "consumequeue/TopicA/1/new"), nil, 0o644)
		}},
		{"dir to remove gained a dir", "entries", func(data string) { os.Mkdir(filepath.Join(data, "consumequeue/TopicA/0/sub"), 0o755) }},
		{"dir to remove vanished", "existence", func(data string) { os.Remove(filepath.Join(data, "consumequeue/TopicA/1")) }},
		{"dir to remove is a file", "type", func(data string) {
			os.Remove(filepath.Join(data, "consumequeue/TopicA/1"))
			os.WriteFile(filepath.Join(data, "consumequeue/TopicA/1"), nil, 0o644)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data := makeTree(t)
			p := dirsPlan(t, data)
			tt.mutate(data)
			before := testutil.TreeHashDirs(t, data)
			rep, err := Apply(context.Background(), p, ApplyOptions{BackupDir: backupDir(data)})
			var se *StaleError
			if !errors.As(err, &se) || se.What != tt.what || rep != nil {
				t.Fatalf("err %v, want ErrStale on %q", err, tt.what)
			}
			testutil.SameTree(t, before, testutil.TreeHashDirs(t, data))
			if _, err := os.Stat(backupDir(data)); !os.IsNotExist(err) {
				t.Fatalf("backup dir exists after a refusal: %v", err)
			}
		})
	}
}

// TestApplyRemoveDirNotEmpty: a file that appears in a dir to remove after
// the check (here: just before its rmdir) fails the apply and everything
// is rolled back; a file that appears in a dir the apply created keeps
// that dir (rollback removes created dirs only when empty) and says so.
func TestApplyRemoveDirNotEmpty(t *testing.T) {
	for _, intruder := range []bool{false, true} {
		data := makeTree(t)
		before := testutil.TreeHashDirs(t, data)
		p := dirsPlan(t, data)
		late := filepath.Join(data, "consumequeue/TopicA/0/late")
		foreign := filepath.Join(data, cqB0+".foreign")
		hook := func(what string) {
			if strings.HasPrefix(what, "rmdir ") {
				os.WriteFile(late, []byte("broker"), 0o644)
				if intruder {
					os.WriteFile(foreign, []byte("broker"), 0o644)
				}
			}
		}
		rep, err := Apply(context.Background(), p, ApplyOptions{BackupDir: backupDir(data), Faults: Faults{onStep: hook, skipSync: true}})
		if !errors.Is(err, ErrApplyFailed) || errors.Is(err, ErrInjected) || !strings.Contains(err.Error(), "not empty") {
			t.Fatalf("err %v, want ErrApplyFailed for a non-empty dir", err)
		}
		os.Remove(late)
		if !intruder {
			if len(rep.RollbackErrors) > 0 {
				t.Fatalf("rollback errors %v", rep.RollbackErrors)
			}
			testutil.SameTree(t, before, testutil.TreeHashDirs(t, data))
			if err := p.Check(data); err != nil {
				t.Fatalf("plan no longer checks after rollback: %v", err)
			}
			continue
		}
		want := []string{"consumequeue/TopicB/0", "consumequeue/TopicB"}
		if len(rep.RollbackErrors) != 2 || !strings.HasPrefix(rep.RollbackErrors[0], want[0]+":") || !strings.HasPrefix(rep.RollbackErrors[1], want[1]+":") ||
			!strings.Contains(err.Error(), "ROLLBACK INCOMPLETE") {
			t.Fatalf("rollback errors %q (err %v), want the two created dirs kept", rep.RollbackErrors, err)
		}
		os.Remove(foreign)
		os.Remove(filepath.Dir(foreign))
		os.Remove(filepath.Dir(filepath.Dir(foreign)))
		testutil.SameTree(t, before, testutil.TreeHashDirs(t, data))
	}
}

// TestUndoDirsWithForeignEntry: after an apply that created dirs, a file
// the apply did not create in one of them makes Undo refuse (ErrStale,
// nothing changed); with Force, Undo removes what the apply created and
// keeps that dir and its parent.
func TestUndoDirsWithForeignEntry(t *testing.T) {
	data := makeTree(t)
	orig := testutil.TreeHashDirs(t, data)
	rep, err := Apply(context.Background(), buildPlan(t, data, opCaseNamed(t, "replace-file creates nested dirs"), SnapshotOptions{}), ApplyOptions{BackupDir: backupDir(data)})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"index", "consumequeue/TopicB", "consumequeue/TopicB/0", "consumequeue/TopicB/1"}; !slices.Equal(rep.DirsCreated, want) {
		t.Fatalf("dirs created %q, want %q", rep.DirsCreated, want)
	}
	if m, err := ReadManifest(rep.BackupDir); err != nil || m.Schema != ManifestSchemaDirs || len(m.Dirs) != 4 {
		t.Fatalf("manifest: %v, want schema %s with 4 dirs", err, ManifestSchemaDirs)
	}
	foreign := filepath.Join(data, "consumequeue/TopicB/0/00000000000000001000")
	os.WriteFile(foreign, []byte("broker wrote on"), 0o644)
	after := testutil.TreeHashDirs(t, data)
	_, err = Undo(context.Background(), rep.BackupDir, UndoOptions{Apply: true})
	var se *StaleError
	if !errors.As(err, &se) || se.What != "entries since the apply" || se.Path != "consumequeue/TopicB/0" {
		t.Fatalf("err %v, want ErrStale on the entries of consumequeue/TopicB/0", err)
	}
	testutil.SameTree(t, after, testutil.TreeHashDirs(t, data))

	urep, err := Undo(context.Background(), rep.BackupDir, UndoOptions{Apply: true, Force: true})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, d := range urep.Dirs {
		got[d.Path] = d.Action
	}
	want := map[string]string{"index": UndoRemoveDir, "consumequeue/TopicB": UndoKeepDir, "consumequeue/TopicB/0": UndoKeepDir, "consumequeue/TopicB/1": UndoRemoveDir}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("undo dir %s: %q, want %q", k, got[k], v)
		}
	}
	os.Remove(foreign)
	os.Remove(filepath.Dir(foreign))
	os.Remove(filepath.Dir(filepath.Dir(foreign)))
	testutil.SameTree(t, orig, testutil.TreeHashDirs(t, data))

	// A plan without dirs keeps the v1 manifest older versions can read.
	data = makeTree(t)
	if rep, err = Apply(context.Background(), buildPlan(t, data, opCases[0], SnapshotOptions{}), ApplyOptions{BackupDir: backupDir(data)}); err != nil {
		t.Fatal(err)
	}
	if m, err := ReadManifest(rep.BackupDir); err != nil || m.Schema != ManifestSchema || m.Dirs != nil {
		t.Fatalf("manifest without dirs: %v, schema %s", err, m.Schema)
	}
}

func opCaseNamed(t *testing.T, name string) opCase {
	for _, c := range opCases {
		if c.name == name {
			return c
		}
	}
	t.Fatalf("no op case %q", name)
	return opCase{}
}

// TestHashWholeSparse: a file with holes (leading, inner and trailing)
// hashes to the SHA-256 of its bytes as read.
func TestHashWholeSparse(t *testing.T) {
	p := filepath.Join(t.TempDir(), "sparse")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteAt([]byte("data in the middle"), 3<<20)
	f.WriteAt([]byte("more"), 5<<20+7)
	f.Truncate(9<<20 + 3)
	f.Close()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	n, sum, err := hashWhole(p)
	if err != nil || n != int64(len(b)) || sum != sumBytes(b) {
		t.Fatalf("hashWhole: %d %s %v; read %d bytes, sha256 %s", n, sum, err, len(b), sumBytes(b))
	}
}
