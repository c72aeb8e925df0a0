package main

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io/fs"
	"math/rand"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/storectl/storectl/internal/testutil"
	"github.com/storectl/storectl/pkg/repair"
)

// TestKillCampaign is the kill -9 campaign of issue 21: storectl is killed
// (SIGKILL, at a random counted write step: a crash, nothing after it
// runs) during truncate, rebuild-index and harden applies (at least 100
// times) and during undo (at least 50), and each time a plain
// `undo --apply --yes` (no --force) must exit 0 and leave the data dir
// byte-identical to what it was before the apply (no staging file, no
// created dir, every mode and mtime that the tree hash covers).
//
// Each trial applies a plan saved once (--plan): the same write steps as
// a planning run, without re-scanning the store every time, which keeps
// the campaign to seconds. The kill points come from a fixed seed, so
// every run (and CI) kills at the same steps; STORECTL_KILL_SEED picks
// others, STORECTL_KILL_TRIALS scales the counts.
func TestKillCampaign(t *testing.T) {
	seed := int64(21)
	if s, err := strconv.ParseInt(os.Getenv("STORECTL_KILL_SEED"), 10, 64); err == nil {
		seed = s
	}
	scale := 1
	if n, err := strconv.Atoi(os.Getenv("STORECTL_KILL_TRIALS")); err == nil && n > 0 {
		scale = n
	}
	t.Logf("seed %d (STORECTL_KILL_SEED=%d repeats this campaign)", seed, seed)
	type kind struct {
		name, fixture, data string
		args                []string
		remove              string
		applies, undos      int // kills per scale unit (harden's trials cost the most)
	}
	kinds := []kind{
		{"truncate", "rocketmq/rmq533-c-stale.tar.gz", "store", []string{"truncate"}, "", 44, 22},
		{"rebuild-index", "rocketmq/rmq533-a-clean.tar.gz", "store", []string{"rebuild-index", "--cq-file-size", "1000"}, "store/consumequeue", 34, 17},
		{"harden", "rabbitmq-4.0/datasets/crash.tar.gz", rabbit40, []string{"harden", "--broker-version", "3.10.8"}, "", 24, 12},
	}
	// The kinds run in parallel (each with its own rng from the seed, so
	// the kill points do not depend on scheduling); the counts are summed
	// once all are done.
	var mu sync.Mutex
	applyKills, undoKills, ran := 0, 0, 0
	t.Run("kinds", func(t *testing.T) {
		for ki, k := range kinds {
			t.Run(k.name, func(t *testing.T) {
				t.Parallel()
				rng := rand.New(rand.NewSource(seed + int64(ki)))
				mu.Lock()
				ran++
				mu.Unlock()
				root := memTempDir(t)
				tmpl := filepath.Join(root, "tmpl")
				work := filepath.Join(root, "w")
				data := filepath.Join(work, k.data)
				bk := filepath.Join(root, "bk")
				plan := filepath.Join(root, "plan.json")
				if err := testutil.UntarTo(testutil.Testdata(k.fixture), tmpl); err != nil {
					t.Fatal(err)
				}
				if k.remove != "" {
					if err := os.RemoveAll(filepath.Join(tmpl, k.remove)); err != nil {
						t.Fatal(err)
					}
				}
				// The data dir is put back from the template before each trial;
				// what lies beside it (the saved plan's stage dir) stays.
				reset := func() {
					t.Helper()
					for _, p := range []string{data, bk} {
						if err := os.RemoveAll(p); err != nil {
							t.Fatal(err)
						}
					}
					copyTree(t, filepath.Join(tmpl, k.data), data)
				}
				if err := os.MkdirAll(work, 0o755); err != nil {
					t.Fatal(err)
				}
				reset()
				before := stateTree(t, data)
				args := append([]string(nil), k.args...)
				if code, out, errOut := (sub{}).run(t, append(args, "--plan-out", plan, "-o", "jsonl", data)...); code != exitFindings {
					t.Fatalf("dry run: exit %d\n%s%s", code, out, errOut)
				}
				apply := append(append([]string(nil), k.args...), "--apply", "--yes", "--plan", plan, "--backup-dir", bk, "-o", "jsonl", data)
				undo := []string{"undo", "--apply", "--yes", "-o", "jsonl", bk}
				steps := func(what string, code int, out string) int {
					t.Helper()
					sum := summaryOf(t, code, out)
					if code != exitOK {
						t.Fatalf("%s: exit %d\n%s", what, code, out)
					}
					extra, _ := sum["extra"].(map[string]any)
					n, _ := extra["write_steps"].(float64)
					if n < 5 {
						t.Fatalf("%s: %v write steps", what, extra["write_steps"])
					}
					return int(n)
				}
				code, out, _ := sub{}.run(t, apply...)
				applySteps := steps("apply", code, out)
				code, out, _ = sub{}.run(t, undo...)
				undoSteps := steps("undo", code, out)
				if after := stateTree(t, data); !equalTrees(before, after) {
					t.Fatalf("the reference apply + undo does not give back the tree:\n%s", treeDiff(before, after))
				}
				check := func(what string) {
					t.Helper()
					if _, err := os.Stat(bk); err == nil {
						code, out, errOut := sub{}.run(t, undo...)
						summaryOf(t, code, out)
						if code != exitOK {
							t.Fatalf("%s: plain undo exits %d\n%s%s", what, code, out, errOut)
						}
					}
					if after := stateTree(t, data); !equalTrees(before, after) {
						t.Fatalf("%s: after undo the data dir differs from before the apply:\n%s", what, treeDiff(before, after))
					}
					if h := repair.HolderOf(data); h != "" {
						t.Fatalf("%s: the writer lock is still held (%s)", what, h)
					}
				}
				for i := 0; i < k.applies*scale; i++ {
					reset()
					n := 1 + rng.Intn(applySteps)
					code, out, errOut := sub{env: []string{"STORECTL_TEST_KILL_AT=" + strconv.Itoa(n)}}.run(t, apply...)
					if code != -1 {
						t.Fatalf("apply killed at step %d/%d: exit %d, not killed\n%s%s", n, applySteps, code, out, errOut)
					}
					check("apply killed at step " + strconv.Itoa(n))
					mu.Lock()
					applyKills++
					mu.Unlock()
				}
				for i := 0; i < k.undos*scale; i++ {
					reset()
					if code, out, errOut := (sub{}).run(t, apply...); code != exitOK && code != exitFindings {
						t.Fatalf("apply: exit %d\n%s%s", code, out, errOut)
					}
					n := 1 + rng.Intn(undoSteps)
					code, out, errOut := sub{env: []string{"STORECTL_TEST_KILL_AT=" + strconv.Itoa(n)}}.run(t, undo...)
					if code != -1 {
						t.Fatalf("undo killed at step %d/%d: exit %d, not killed\n%s%s", n, undoSteps, code, out, errOut)
					}
					check("undo killed at step " + strconv.Itoa(n))
					mu.Lock()
					undoKills++
					mu.Unlock()
				}
				t.Logf("%s: %d kills among %d apply steps, %d among %d undo steps", k.name, k.applies*scale, applySteps, k.undos*scale, undoSteps)
			})
		}
	})
	t.Logf("kill -9 campaign: %d kills during applies, %d during undos; every one undone byte-identical by a plain undo", applyKills, undoKills)
	if !t.Failed() && ran == len(kinds) && (applyKills < 100*scale || undoKills < 50*scale) {
		t.Fatalf("only %d apply and %d undo kills", applyKills, undoKills)
	}
}

// memTempDir is a temp dir in memory (/dev/shm) when there is one: the
// campaign's hundreds of applies fsync at every step, which a disk turns
// into minutes, and a crash of the process (not of the machine) is what
// it tests. Else t.TempDir.
func memTempDir(t *testing.T) string {
	t.Helper()
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		if d, err := os.MkdirTemp("/dev/shm", "storectl-kill-"); err == nil {
			t.Cleanup(func() { os.RemoveAll(d) })
			return d
		}
	}
	return t.TempDir()
}

// stateTree is what the campaign compares: every file's bytes, mode and
// mtime, every dir's mode, every symlink's target, under dir.
func stateTree(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		fi, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.Type().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			out[rel] = fmt.Sprintf("%x %v %d", sha256.Sum256(b), fi.Mode(), fi.ModTime().UnixNano())
		case d.IsDir():
			out[rel+"/"] = fi.Mode().String()
		default:
			target, _ := os.Readlink(p)
			out[rel] = fi.Mode().String() + " " + target
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// copyTree copies the tree src to dst (which must not exist), keeping
// modes and mtimes.
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	type dirTime struct {
		p  string
		mt time.Time
	}
	var dirs []dirTime
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		to := filepath.Join(dst, rel)
		fi, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			dirs = append(dirs, dirTime{to, fi.ModTime()})
			if err := os.Mkdir(to, fi.Mode().Perm()); err != nil {
				return err
			}
			return os.Chmod(to, fi.Mode().Perm())
		case d.Type().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			if err := os.WriteFile(to, b, fi.Mode().Perm()); err != nil {
				return err
			}
			if err := os.Chmod(to, fi.Mode().Perm()); err != nil {
				return err
			}
			return os.Chtimes(to, fi.ModTime(), fi.ModTime())
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for i := len(dirs) - 1; i >= 0; i-- {
		if err := os.Chtimes(dirs[i].p, dirs[i].mt, dirs[i].mt); err != nil {
			t.Fatal(err)
		}
	}
}

// treeDiff lists the paths whose hashes differ between two tree hashes.
func treeDiff(a, b map[string]string) string {
	var out []string
	for k, v := range a {
		if b[k] != v {
			out = append(out, "changed or missing: "+k)
		}
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			out = append(out, "new: "+k)
		}
	}
	j, _ := json.Marshal(out)
	return strings.ReplaceAll(string(j), `","`, "\n")
}
