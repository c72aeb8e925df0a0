package repair

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/storectl/storectl/internal/testutil"
)

// testChunk replaces chunkSize in tests: small files still span chunks.
const testChunk = 4096

func TestMain(m *testing.M) {
	chunkSize = testChunk
	os.Exit(m.Run())
}

// fixedMtime is given to every test file so that restoring mtimes is checked
// against a value no write could produce by accident.
var fixedMtime = time.Unix(1700000000, 123456789)

// treeFiles is the deterministic content of a test data dir.
func treeFiles() map[string][]byte {
	rng := rand.New(rand.NewPCG(1, 2))
	blob := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.UintN(255) + 1) // never 0, so zeroing always shows
		}
		return b
	}
	return map[string][]byte{
		"commitlog/00000000000000000000": blob(3*testChunk + 1234), // several copy chunks
		"queue/a.idx":                    blob(testChunk + 904),
		"small.bin":                      blob(100),
		"empty.bin":                      {},
		cqA0:                             blob(60),
	}
}

// treeDirs are the dirs of a test data dir, parents first, and their
// modes: distinct modes (setgid, 0700) show whether a dir is recreated or
// created as it should be; consumequeue/TopicA/1 is empty.
var treeDirs = []struct {
	rel  string
	mode fs.FileMode
}{
	{"", 0o755},
	{"commitlog", 0o755},
	{"queue", 0o750},
	{"consumequeue", 0o775 | fs.ModeSetgid},
	{"consumequeue/TopicA", 0o755},
	{"consumequeue/TopicA/0", 0o750},
	{"consumequeue/TopicA/1", 0o700},
}

// makeTree writes treeFiles and treeDirs under <tmp>/data and returns the
// data dir.
func makeTree(t *testing.T) string { return makeTreeWith(t, true) }

// makeTreeFor is makeTree without the consumequeue/ subtree for a case
// that does not use it: the fault tests build hundreds of trees.
func makeTreeFor(t *testing.T, c opCase) string { return makeTreeWith(t, dirCases[c.name]) }

func makeTreeWith(t *testing.T, cq bool) string {
	t.Helper()
	data := filepath.Join(t.TempDir(), "data")
	for _, d := range treeDirs {
		if !cq && strings.HasPrefix(d.rel, "consumequeue") {
			continue
		}
		if err := os.Mkdir(filepath.Join(data, d.rel), d.mode.Perm()); err != nil {
			t.Fatal(err)
		}
	}
	for rel, b := range treeFiles() {
		if !cq && strings.HasPrefix(rel, "consumequeue") {
			continue
		}
		p := filepath.Join(data, rel)
		if err := os.WriteFile(p, b, 0o640); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, fixedMtime, fixedMtime); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range treeDirs {
		if !cq && strings.HasPrefix(d.rel, "consumequeue") {
			continue
		}
		if d.mode&^0o755 != 0 { // bits the umask or Mkdir may drop
			if err := os.Chmod(filepath.Join(data, d.rel), d.mode); err != nil {
				t.Fatal(err)
			}
		}
	}
	return data
}

// stageFile writes a staged source outside the data dir.
func stageFile(t *testing.T, data string, name string, b []byte) string {
	t.Helper()
	p := filepath.Join(filepath.Dir(data), "stage-"+name)
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// readTree returns path -> content of every regular file under dir.
func readTree(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		b, err := os.ReadFile(p)
		rel, _ := filepath.Rel(dir, p)
		out[filepath.ToSlash(rel)] = b
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// hashContent is testutil.TreeHash of a tree held in memory (path ->
// hex SHA-256 of its bytes), to compare it with a tree on disk by
// testutil.SameTree.
func hashContent(files map[string][]byte) map[string]string {
	out := make(map[string]string, len(files))
	for k, b := range files {
		s := sha256.Sum256(b)
		out[k] = hex.EncodeToString(s[:])
	}
	return out
}

const (
	cl    = "commitlog/00000000000000000000"
	idx   = "queue/a.idx"
	small = "small.bin"
	cqA0  = "consumequeue/TopicA/0/00000000000000000000"
	cqB0  = "consumequeue/TopicB/0/00000000000000000000"
	cqB1  = "consumequeue/TopicB/1/00000000000000000000"
	index = "index/20240101000000000"
)

// opCase builds a plan on a fresh tree and says what the tree must hold
// after Apply, computed from the original bytes with plain slice operations.
type opCase struct {
	name  string
	build func(t *testing.T, data string) []Action
	want  func(m map[string][]byte)
}

var staged = bytes.Repeat([]byte("STAGED-"), 500) // 3500 bytes

var opCases = []opCase{
	{"zero-range", func(t *testing.T, _ string) []Action {
		return []Action{{Op: OpZeroRange, Path: small, Offset: 10, Length: 20, Reason: "test.zero"}}
	}, func(m map[string][]byte) { clear(m[small][10:30]) }},
	{"write-range inline", func(t *testing.T, _ string) []Action {
		return []Action{{Op: OpWriteRange, Path: cl, Offset: 100, Length: 5, Data: []byte("HELLO")}}
	}, func(m map[string][]byte) { copy(m[cl][100:], "HELLO") }},
	{"write-range staged across chunks", func(t *testing.T, data string) []Action {
		return []Action{{Op: OpWriteRange, Path: cl, Offset: testChunk - 1000, Source: stageFile(t, data, "w", staged)}}
	}, func(m map[string][]byte) { copy(m[cl][testChunk-1000:], staged) }},
	{"truncate-file", func(t *testing.T, _ string) []Action {
		return []Action{{Op: OpTruncateFile, Path: idx, NewSize: 1000, Lost: Loss{Records: 3, MsgIDs: []string{"a", "b", "c"}}}}
	}, func(m map[string][]byte) { m[idx] = m[idx][:1000] }},
	{"truncate-file to zero", func(t *testing.T, _ string) []Action {
		return []Action{{Op: OpTruncateFile, Path: small, NewSize: 0}}
	}, func(m map[string][]byte) { m[small] = []byte{} }},
	{"resize-file shrink", func(t *testing.T, _ string) []Action {
		return []Action{{Op: OpResizeFile, Path: cl, NewSize: 2*testChunk + 17}}
	}, func(m map[string][]byte) { m[cl] = m[cl][:2*testChunk+17] }},
	{"resize-file extend", func(t *testing.T, _ string) []Action {
		return []Action{{Op: OpResizeFile, Path: small, NewSize: testChunk + 5000}}
	}, func(m map[string][]byte) { m[small] = append(m[small], make([]byte, testChunk+5000-100)...) }},
	{"remove-file", func(t *testing.T, _ string) []Action {
		return []Action{{Op: OpRemoveFile, Path: idx}}
	}, func(m map[string][]byte) { delete(m, idx) }},
	{"remove empty file", func(t *testing.T, _ string) []Action {
		return []Action{{Op: OpRemoveFile, Path: "empty.bin"}}
	}, func(m map[string][]byte) { delete(m, "empty.bin") }},
	{"replace-file inline", func(t *testing.T, _ string) []Action {
		return []Action{{Op: OpReplaceFile, Path: small, Data: []byte("new content")}}
	}, func(m map[string][]byte) { m[small] = []byte("new content") }},
	{"replace-file creates from stage", func(t *testing.T, data string) []Action {
		return []Action{{Op: OpReplaceFile, Path: "queue/new.idx", Source: stageFile(t, data, "r", staged)}}
	}, func(m map[string][]byte) { m["queue/new.idx"] = bytes.Clone(staged) }},
	{"replace-file creates nested dirs", func(t *testing.T, data string) []Action {
		return []Action{
			{Op: OpReplaceFile, Path: cqB0, Source: stageFile(t, data, "b0", staged)},
			{Op: OpReplaceFile, Path: cqB1, Data: []byte("unit")},
			{Op: OpReplaceFile, Path: index, Data: []byte("idx")},
		}
	}, func(m map[string][]byte) {
		m[cqB0], m[cqB1], m[index] = bytes.Clone(staged), []byte("unit"), []byte("idx")
	}},
	{"remove-dir after its files", func(t *testing.T, data string) []Action {
		return []Action{ // plan order is not apply order: files first, then dirs deepest first
			{Op: OpRemoveDir, Path: "consumequeue/TopicA"},
			{Op: OpRemoveFile, Path: cqA0},
			{Op: OpRemoveDir, Path: "consumequeue/TopicA/1"},
			{Op: OpRemoveDir, Path: "consumequeue/TopicA/0"},
		}
	}, func(m map[string][]byte) { delete(m, cqA0) }},
	// The last case combines every op, dirs created (two levels, under a
	// setgid dir: a chmod step) and removed (nested, in plan order parents
	// first); the fault, crash, cancel and JSON tests run it.
	{"several files, dirs and ops", func(t *testing.T, data string) []Action {
		return []Action{
			{Op: OpZeroRange, Path: small, Offset: 0, Length: 10},
			{Op: OpWriteRange, Path: small, Offset: 50, Length: 3, Data: []byte("xyz")},
			{Op: OpTruncateFile, Path: small, NewSize: 80},
			{Op: OpRemoveFile, Path: idx},
			{Op: OpReplaceFile, Path: "queue/new.idx", Data: []byte("fresh")},
			{Op: OpZeroRange, Path: cl, Offset: 2 * testChunk, Length: testChunk},
			{Op: OpResizeFile, Path: cl, NewSize: 4 * testChunk},
			{Op: OpRemoveDir, Path: "consumequeue/TopicA"},
			{Op: OpRemoveFile, Path: cqA0},
			{Op: OpRemoveDir, Path: "consumequeue/TopicA/0"},
			{Op: OpReplaceFile, Path: cqB0, Data: []byte("rebuilt")},
			{Op: OpRemoveDir, Path: "consumequeue/TopicA/1"},
		}
	}, func(m map[string][]byte) {
		clear(m[small][:10])
		copy(m[small][50:], "xyz")
		m[small] = m[small][:80]
		delete(m, idx)
		m["queue/new.idx"] = []byte("fresh")
		clear(m[cl][2*testChunk : 3*testChunk])
		m[cl] = append(m[cl], make([]byte, 4*testChunk-len(m[cl]))...)
		delete(m, cqA0)
		m[cqB0] = []byte("rebuilt")
	}},
}

// dirCases are the cases that use the consumequeue/ subtree.
var dirCases = map[string]bool{"replace-file creates nested dirs": true, "remove-dir after its files": true, "several files, dirs and ops": true}

// buildPlan makes the case's plan over data.
func buildPlan(t *testing.T, data string, c opCase, o SnapshotOptions) *Plan {
	t.Helper()
	p, err := NewPlan(data, "test", fixedMtime)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range c.build(t, data) {
		if err := p.Add(a, o); err != nil {
			t.Fatalf("Add %s: %v", a.Op, err)
		}
	}
	return p
}

func backupDir(data string) string { return filepath.Join(filepath.Dir(data), "backup") }

// TestApplyUndoOps applies each op, checks the result against the expected
// tree and the report, then undoes it and checks every byte and mtime is back.
func TestApplyUndoOps(t *testing.T) {
	for _, c := range opCases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			data := makeTreeFor(t, c)
			want := readTree(t, data) // the original bytes, made the expected ones after Apply
			origHash := testutil.TreeHashDirs(t, data)
			p := buildPlan(t, data, c, SnapshotOptions{})
			if err := p.Check(data); err != nil { // planning is a dry run: nothing changed
				t.Fatalf("Check after planning: %v", err)
			}
			testutil.SameTree(t, origHash, testutil.TreeHashDirs(t, data))

			rep, err := Apply(context.Background(), p, ApplyOptions{BackupDir: backupDir(data)})
			if err != nil {
				t.Fatalf("Apply: %v", err)
			}
			c.want(want)
			testutil.SameTree(t, hashContent(want), testutil.TreeHash(t, data))
			checkReport(t, data, rep)
			checkDirs(t, p, origHash, testutil.TreeHashDirs(t, data), want)
			if _, err := os.Stat(filepath.Join(rep.BackupDir, ManifestName)); err != nil {
				t.Fatal(err)
			}

			afterHash := testutil.TreeHashDirs(t, data)
			urep, err := Undo(context.Background(), rep.BackupDir, UndoOptions{})
			if err != nil || urep.Applied {
				t.Fatalf("Undo dry run: %v applied=%v", err, urep.Applied)
			}
			testutil.SameTree(t, afterHash, testutil.TreeHashDirs(t, data))

			if _, err := Undo(context.Background(), rep.BackupDir, UndoOptions{Apply: true}); err != nil {
				t.Fatalf("Undo: %v", err)
			}
			testutil.SameTree(t, origHash, testutil.TreeHashDirs(t, data))
			if err := p.Check(data); err != nil { // sizes, mtimes and hashes all back
				t.Fatalf("Check after undo: %v", err)
			}
			// A second undo finds nothing to do and changes nothing.
			urep, err = Undo(context.Background(), rep.BackupDir, UndoOptions{Apply: true})
			if err != nil {
				t.Fatalf("second Undo: %v", err)
			}
			for _, f := range urep.Files {
				if f.Action != UndoNothing {
					t.Errorf("second undo: %s: %s", f.Path, f.Action)
				}
			}
			testutil.SameTree(t, origHash, testutil.TreeHashDirs(t, data))
		})
	}
}

// checkDirs requires the dirs after an apply to be the original ones,
// plus the parents of every wanted file, minus those the plan removes; a
// new dir must have the mode of its nearest original parent.
func checkDirs(t *testing.T, p *Plan, before, after map[string]string, files map[string][]byte) {
	t.Helper()
	want := map[string]bool{}
	for k := range before {
		if strings.HasSuffix(k, "/") {
			want[k] = true
		}
	}
	for f := range files {
		for _, d := range ancestors(f) {
			want[d+"/"] = true
		}
	}
	for _, a := range p.Actions {
		if a.Op == OpRemoveDir {
			delete(want, a.Path+"/")
		}
	}
	for k, mode := range after {
		if !strings.HasSuffix(k, "/") {
			continue
		}
		if !want[k] {
			t.Errorf("unexpected dir %s", k)
		}
		delete(want, k)
		if _, ok := before[k]; ok {
			continue
		}
		parent := filepath.Dir(strings.TrimSuffix(k, "/"))
		for ; parent != "." && before[parent+"/"] == ""; parent = filepath.Dir(parent) {
		}
		if pm := before[parent+"/"]; parent != "." && mode != pm {
			t.Errorf("created dir %s has mode %s, its parent %s has %s", k, mode, parent, pm)
		}
	}
	for k := range want {
		t.Errorf("missing dir %s", k)
	}
}

// checkReport compares the report's after hashes with the files.
func checkReport(t *testing.T, data string, rep *ApplyReport) {
	t.Helper()
	got := testutil.TreeHashDirs(t, data)
	for _, a := range rep.Actions {
		if a.Status != StatusApplied {
			t.Errorf("%s: status %s", a.ID, a.Status)
		}
		if a.SHA256After != got[a.Path] {
			t.Errorf("%s: report after %q, file %q", a.ID, a.SHA256After, got[a.Path])
		}
	}
}

func TestApplyDefaultBackupDirBesideData(t *testing.T) {
	if got := DefaultBackupDir("/srv/store/", time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)); got != "/srv/store.storectl-backup-20260102T030405Z" {
		t.Fatalf("DefaultBackupDir = %s", got)
	}
	data := makeTree(t)
	rep, err := Apply(context.Background(), buildPlan(t, data, opCases[0], SnapshotOptions{}), ApplyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Dir(rep.BackupDir) != filepath.Dir(data) || !strings.HasPrefix(filepath.Base(rep.BackupDir), "data.storectl-backup-") {
		t.Fatalf("backup dir %s not beside %s", rep.BackupDir, data)
	}
	if _, err := ReadManifest(rep.BackupDir); err != nil {
		t.Fatal(err)
	}
}

func TestUndoRefusesChangedFiles(t *testing.T) {
	data := makeTree(t)
	rep, err := Apply(context.Background(), buildPlan(t, data, opCases[0], SnapshotOptions{}), ApplyOptions{BackupDir: backupDir(data)})
	if err != nil {
		t.Fatal(err)
	}
	f, _ := os.OpenFile(filepath.Join(data, small), os.O_WRONLY|os.O_APPEND, 0)
	f.Write([]byte("broker wrote more"))
	f.Close()
	before := testutil.TreeHashDirs(t, data)
	_, err = Undo(context.Background(), rep.BackupDir, UndoOptions{Apply: true})
	var se *StaleError
	if !errors.Is(err, ErrStale) || !errors.As(err, &se) || se.Path != small {
		t.Fatalf("Undo after change: %v, want ErrStale on %s", err, small)
	}
	testutil.SameTree(t, before, testutil.TreeHashDirs(t, data))
}

// TestUndoForceWholeFile: a removed file recreated after the apply is stale,
// and Force puts the original back.
func TestUndoForceWholeFile(t *testing.T) {
	data := makeTree(t)
	orig := testutil.TreeHashDirs(t, data)
	rep, err := Apply(context.Background(), buildPlan(t, data, opCases[7], SnapshotOptions{}), ApplyOptions{BackupDir: backupDir(data)})
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(data, idx), []byte("recreated"), 0o644)
	if _, err := Undo(context.Background(), rep.BackupDir, UndoOptions{Apply: true}); !errors.Is(err, ErrStale) {
		t.Fatalf("want ErrStale, got %v", err)
	}
	if _, err := Undo(context.Background(), rep.BackupDir, UndoOptions{Apply: true, Force: true}); err != nil {
		t.Fatal(err)
	}
	testutil.SameTree(t, orig, testutil.TreeHashDirs(t, data))
}
