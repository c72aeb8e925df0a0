package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestUndoRefusesOversizedManifest: a manifest whose recorded size of a
// file is more than its pre-images and the current file hold (1 TiB, or
// 1 MiB past the file) makes undo refuse (exit 4) before it writes
// anything: no sparse 1 TiB file appears and nothing is hashed for it
// (issue 21, "also seen": undo created and hashed a 1 TiB sparse file,
// then failed). The same backup with its manifest put back still undoes.
func TestUndoRefusesOversizedManifest(t *testing.T) {
	dir := fixture(t, "rocketmq/rmq533-c-stale.tar.gz")
	store := filepath.Join(dir, "store")
	bk := filepath.Join(t.TempDir(), "bk")
	before := hashTree(t, store)
	if code, out, errOut := runCLI(t, "truncate", "--apply", "--yes", "--backup-dir", bk, "-o", "jsonl", store); code != exitOK {
		t.Fatalf("truncate --apply: exit %d\n%s%s", code, out, errOut)
	}
	applied := hashTree(t, store)
	mpath := filepath.Join(bk, "manifest.json")
	orig, err := os.ReadFile(mpath)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(orig, &m); err != nil {
		t.Fatal(err)
	}
	files := m["files"].([]any)
	rec := files[0].(map[string]any)
	path, size := rec["path"].(string), int64(rec["size"].(float64))
	for _, claim := range []int64{1 << 40, size + 1<<20} {
		t.Run(strconv.FormatInt(claim, 10), func(t *testing.T) {
			rec["size"] = claim
			b, err := json.Marshal(m)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(mpath, b, 0o600); err != nil {
				t.Fatal(err)
			}
			code, out, errOut := runCLI(t, "undo", "--apply", "--yes", "-o", "jsonl", bk)
			summaryOf(t, code, out)
			if code != exitRefused || !strings.Contains(out, "the backup cannot restore what its manifest describes") || !strings.Contains(out, path) {
				t.Fatalf("undo of a manifest claiming %d bytes for %s (%d on disk): exit %d, want 4 naming the file\n%s%s", claim, path, size, code, out, errOut)
			}
			if after := hashTree(t, store); !equalTrees(applied, after) {
				t.Fatalf("the refused undo changed the data dir:\n%s", treeDiff(applied, after))
			}
			st, err := os.Stat(filepath.Join(store, path))
			if err != nil || st.Size() != size {
				t.Fatalf("%s after the refused undo: %v %v, want %d bytes", path, st, err, size)
			}
		})
	}
	if err := os.WriteFile(mpath, orig, 0o600); err != nil {
		t.Fatal(err)
	}
	if code, out, errOut := runCLI(t, "undo", "--apply", "--yes", "-o", "jsonl", bk); code != exitOK {
		t.Fatalf("undo with the manifest put back: exit %d\n%s%s", code, out, errOut)
	}
	if after := hashTree(t, store); !equalTrees(before, after) {
		t.Fatalf("undo did not give the data dir back:\n%s", treeDiff(before, after))
	}
}

// TestStageDirs: rebuild-index stages its files in .store.storectl-stage-N
// beside the data dir. An apply that fails (a write fault, rolled back)
// removes its stage; one killed (SIGKILL) leaves it, and verify lists it
// as a storectl.stage.leftover finding naming the dir (issue 21, "also
// seen": a killed rebuild-index left its stage, and nothing said so).
func TestStageDirs(t *testing.T) {
	dir := fixture(t, "rocketmq/rmq533-a-clean.tar.gz")
	store := filepath.Join(dir, "store")
	if err := os.RemoveAll(filepath.Join(store, "consumequeue")); err != nil {
		t.Fatal(err)
	}
	stages := func() []string {
		t.Helper()
		m, err := filepath.Glob(filepath.Join(dir, ".store.storectl-stage-*"))
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	args := func(bk string) []string {
		return []string{"rebuild-index", "--cq-file-size", "1000", "--apply", "--yes", "--backup-dir", filepath.Join(t.TempDir(), bk), "-o", "jsonl", store}
	}
	code, out, errOut := sub{env: []string{"STORECTL_TEST_FAIL_WRITE=6"}}.run(t, args("bk1")...)
	summaryOf(t, code, out)
	if code != exitApplyFailed {
		t.Fatalf("apply with a fault at write step 6: exit %d, want 5\n%s%s", code, out, errOut)
	}
	if s := stages(); len(s) != 0 {
		t.Fatalf("the failed apply left its stage: %v", s)
	}
	code, out, errOut = sub{env: []string{"STORECTL_TEST_KILL_AT=6"}}.run(t, args("bk2")...)
	if code != -1 {
		t.Fatalf("apply killed at write step 6: exit %d\n%s%s", code, out, errOut)
	}
	left := stages()
	if len(left) != 1 {
		t.Fatalf("the killed apply left %d stage dirs: %v", len(left), left)
	}
	code, out, errOut = sub{}.run(t, "verify", "-o", "jsonl", store)
	summaryOf(t, code, out)
	var found bool
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		var r map[string]any
		if json.Unmarshal([]byte(l), &r) == nil && r["code"] == "storectl.stage.leftover" && strings.Contains(r["message"].(string), left[0]) {
			found = true
		}
	}
	if !found {
		t.Fatalf("verify does not list the stage dir %s\n%s%s", left[0], out, errOut)
	}
}
