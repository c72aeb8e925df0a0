package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/storectl/storectl/internal/testutil"
	"github.com/storectl/storectl/pkg/repair"
)

// Disk-full tests of issue 21, defect 7: after ENOSPC the report claimed
// "rolled back" while the data dir was that of a completed apply, listed
// no path, and left the manifest "prepared" (undo then needed --force).
// Now the report's claim, path by path, is the tree's state byte for byte
// (rolled_back: as before the apply; still_changed: as after it; every
// other path: untouched), the backup's state says the same, and a plain
// undo, once there is space, gives back the original tree.

// applyOutcome is what a failed apply's JSONL report claims.
type applyOutcome struct {
	code         int
	rolledBack   []string
	stillChanged []string
	statuses     map[string]string // path -> status of its actions
}

func parseOutcome(t *testing.T, code int, out string) applyOutcome {
	t.Helper()
	o := applyOutcome{code: code, statuses: map[string]string{}}
	sum := summaryOf(t, code, out)
	extra, _ := sum["extra"].(map[string]any)
	for _, k := range []string{"rolled_back", "still_changed"} {
		l, _ := extra[k].([]any)
		for _, p := range l {
			if k == "rolled_back" {
				o.rolledBack = append(o.rolledBack, p.(string))
			} else {
				o.stillChanged = append(o.stillChanged, p.(string))
			}
		}
	}
	for _, line := range strings.Split(out, "\n") {
		var a struct{ Type, Path, Status string }
		if json.Unmarshal([]byte(line), &a) == nil && a.Type == "action" {
			o.statuses[a.Path] = a.Status
		}
	}
	return o
}

// checkClaims compares the claims with the data dir: every file of it is
// as before, except those claimed still changed, which are as after a
// complete apply; the statuses agree.
func checkClaims(t *testing.T, what string, o applyOutcome, before, after, now map[string]string) {
	t.Helper()
	still := map[string]bool{}
	for _, p := range o.stillChanged {
		still[p] = true
		if o.statuses[p] != repair.StatusApplied {
			t.Errorf("%s: %s is still changed but its actions say %q", what, p, o.statuses[p])
		}
	}
	for _, p := range o.rolledBack {
		if still[p] {
			t.Errorf("%s: %s claimed both rolled back and still changed", what, p)
		}
	}
	keys := map[string]bool{}
	for _, m := range []map[string]string{before, after, now} {
		for k := range m {
			keys[k] = true
		}
	}
	for k := range keys {
		want, got, claim := before[k], now[k], "as before"
		if still[k] { // the applied bytes and mode; the mtime is the apply's own
			want, got, claim = content(after[k]), content(now[k]), "still changed"
		}
		if got != want {
			t.Errorf("%s: %s: the report claims it %s, the tree disagrees", what, k, claim)
		}
	}
	for p, st := range o.statuses {
		if st == repair.StatusApplied && !still[p] {
			t.Errorf("%s: %s reported applied after a failed apply, but not still changed", what, p)
		}
	}
}

// content drops the mtime from a stateTree value: what an apply writes
// is its bytes and mode; the mtime is the moment it ran.
func content(v string) string {
	if i := strings.LastIndexByte(v, ' '); i > 0 && strings.Count(v, " ") == 2 {
		return v[:i]
	}
	return v
}

// sameContent compares two stateTrees without the files' mtimes.
func sameContent(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if content(b[k]) != content(v) {
			return false
		}
	}
	return true
}

// short is at most the last 3000 bytes of a report, for failure messages.
func short(s string) string {
	if len(s) > 3000 {
		return "…" + s[len(s)-3000:]
	}
	return s
}

// backupState is the outcome the backup records (journal, else manifest).
func backupState(t *testing.T, bk string) string {
	t.Helper()
	js, err := repair.ReadJournal(bk)
	if err != nil {
		t.Fatal(err)
	}
	for i := len(js) - 1; i >= 0; i-- {
		if js[i].Op == repair.JournalState {
			return js[i].State
		}
	}
	m, err := repair.ReadManifest(bk)
	if err != nil {
		return ""
	}
	return m.State
}

// TestDiskFullEveryStep fails every allocating write from step n on with
// ENOSPC, rollback included (repair.DiskFullAt), for every n of a RocketMQ
// truncate and every 4th n of a harden (14 write-ranges over 11 files: the
// rollback writes the pre-images back in place, which needs no space).
// pkg/repair's TestDiskFullRollbackTruth covers rollbacks that cannot
// finish, step by step; TestDiskFullTmpfs a real full file system.
func TestDiskFullEveryStep(t *testing.T) {
	type tcase struct {
		name, fixture, data string
		args                []string
		every               int
	}
	cases := []tcase{
		{"truncate-rocketmq", "rocketmq/rmq533-c-stale.tar.gz", "store", []string{"truncate"}, 1},
		{"harden", "rabbitmq-4.0/datasets/crash.tar.gz", rabbit40, []string{"harden", "--broker-version", "3.13.0"}, 4},
	}
	runs, incomplete := 0, 0
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			root := memTempDir(t)
			tmpl := filepath.Join(root, "tmpl")
			if err := testutil.UntarTo(testutil.Testdata(c.fixture), tmpl); err != nil {
				t.Fatal(err)
			}
			work := filepath.Join(root, "w")
			data := filepath.Join(work, c.data)
			bk := filepath.Join(root, "bk")
			reset := func() {
				for _, p := range []string{data, bk} {
					os.RemoveAll(p)
				}
				copyTree(t, filepath.Join(tmpl, c.data), data)
			}
			os.MkdirAll(work, 0o755)
			reset()
			before := stateTree(t, data)
			apply := append(append([]string(nil), c.args...), "--apply", "--yes", "--backup-dir", bk, "-o", "jsonl", data)
			code, out, errOut := sub{}.run(t, apply...)
			if code != exitOK && code != exitFindings {
				t.Fatalf("reference apply: exit %d\n%s%s", code, out, errOut)
			}
			sum := summaryOf(t, code, out)
			steps := int(sum["extra"].(map[string]any)["write_steps"].(float64))
			after := stateTree(t, data)
			for n := 1; n <= steps; n += c.every {
				reset()
				code, out, errOut := sub{env: []string{"STORECTL_TEST_DISK_FULL_AT=" + strconv.Itoa(n)}}.run(t, apply...)
				what := c.name + " disk full from step " + strconv.Itoa(n)
				now := stateTree(t, data)
				switch code {
				case exitOK, exitFindings: // no allocation left to fail, or only the manifest rewrite after the journal (a warning)
					if !sameContent(after, now) {
						t.Fatalf("%s: exit %d but the tree is not the applied one", what, code)
					}
				case exitApplyFailed:
					o := parseOutcome(t, code, out)
					checkClaims(t, what, o, before, after, now)
					want := repair.StateRolledBack
					if len(o.stillChanged) > 0 {
						want = repair.StateRollbackIncomplete
						incomplete++
					}
					if _, err := os.Stat(filepath.Join(bk, repair.ManifestName)); err == nil {
						if got := backupState(t, bk); got != want {
							t.Errorf("%s: the backup says %q, the report %q", what, got, want)
						}
					}
				case exitUsage: // the backup dir itself could not be made
					if !strings.Contains(out, "unusable backup dir") || !equalTrees(before, now) {
						t.Fatalf("%s: exit 2\n%s%s", what, short(out), errOut)
					}
				default:
					t.Fatalf("%s: exit %d\n%s%s", what, code, short(out), errOut)
				}
				// the space is back: a plain undo restores the original
				if _, err := os.Stat(bk); err == nil {
					if code, out, errOut := (sub{}).run(t, "undo", "--apply", "--yes", "-o", "jsonl", bk); code != exitOK {
						t.Fatalf("%s: plain undo: exit %d\n%s%s", what, code, short(out), errOut)
					}
				}
				if now := stateTree(t, data); !equalTrees(before, now) {
					t.Fatalf("%s: after undo:\n%s", what, treeDiff(before, now))
				}
				runs++
			}
			t.Logf("%s: ENOSPC from every %d of its %d write steps", c.name, c.every, steps)
		})
	}
	t.Logf("%d disk-full runs (%d with a rollback that could not finish): every claim matched the tree, every plain undo restored it", runs, incomplete)
}

// TestDiskFullTmpfs runs harden on the real RabbitMQ 4.0.5 crash node
// copied onto a small tmpfs (the reproduction of defect 7: about 340 KiB
// free), with the backup on the same file system, for a range of free
// space: the report's claim is the tree's state; after the tmpfs grows, a
// plain undo restores the original. Needs root and mount(8).
func TestDiskFullTmpfs(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root to mount a tmpfs (TestDiskFullEveryStep injects ENOSPC instead)")
	}
	mnt := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", mnt).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs here (%v: %s); TestDiskFullEveryStep injects ENOSPC instead", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", mnt).Run() })
	tmpl := filepath.Join(t.TempDir(), "tmpl")
	if err := testutil.UntarTo(testutil.Testdata("rabbitmq-4.0/datasets/crash.tar.gz"), tmpl); err != nil {
		t.Fatal(err)
	}
	// The applied state, for the paths a report says are still changed.
	ref := filepath.Join(t.TempDir(), "ref")
	copyTree(t, filepath.Join(tmpl, rabbit40), ref)
	before := stateTree(t, ref)
	if code, out, _ := (sub{}).run(t, "harden", "--broker-version", "3.13.0", "--apply", "--yes", "--backup-dir", ref+".bk", "-o", "jsonl", ref); code != exitOK && code != exitFindings {
		t.Fatalf("reference apply: exit %d\n%s", code, out)
	}
	after := stateTree(t, ref)
	data := filepath.Join(mnt, rabbit40)
	bk := filepath.Join(mnt, "bk")
	var used int64
	failed := 0
	for _, freeKiB := range []int{0, 16, 64, 128, 200, 260, 340, 420, 600, 900, 1400, 2200} {
		exec.Command("mount", "-o", "remount,size=64m", mnt).Run()
		os.RemoveAll(data)
		os.RemoveAll(bk)
		copyTree(t, filepath.Join(tmpl, rabbit40), data)
		if used == 0 {
			used = duKiB(t, mnt)
		}
		size := used + int64(freeKiB)
		if out, err := exec.Command("mount", "-o", "remount,size="+strconv.FormatInt(size, 10)+"k", mnt).CombinedOutput(); err != nil {
			t.Fatalf("remount: %v %s", err, out)
		}
		what := "tmpfs with " + strconv.Itoa(freeKiB) + " KiB free"
		code, out, errOut := sub{}.run(t, "harden", "--broker-version", "3.13.0", "--apply", "--yes", "--backup-dir", bk, "-o", "jsonl", data)
		now := stateTree(t, data)
		switch code {
		case exitOK, exitFindings:
			if !sameContent(after, now) {
				t.Fatalf("%s: exit %d but not the applied tree:\n%s", what, code, treeDiff(after, now))
			}
		case exitApplyFailed, exitIncomplete:
			o := parseOutcome(t, code, out)
			checkClaims(t, what, o, before, after, now)
			failed++
		default:
			t.Fatalf("%s: exit %d\n%s%s", what, code, short(out), errOut)
		}
		exec.Command("mount", "-o", "remount,size=64m", mnt).Run()
		if _, err := os.Stat(bk); err == nil {
			if code, out, errOut := (sub{}).run(t, "undo", "--apply", "--yes", "-o", "jsonl", bk); code != exitOK {
				t.Fatalf("%s: plain undo after the space came back: exit %d\n%s%s", what, code, short(out), errOut)
			}
		}
		if now := stateTree(t, data); !equalTrees(before, now) {
			t.Fatalf("%s: after undo:\n%s", what, treeDiff(before, now))
		}
		t.Logf("%s: exit %d", what, code)
	}
	if failed == 0 {
		t.Fatal("no run ran out of space: the test did not test anything")
	}
}

// duKiB is the KiB a tmpfs has in use (statfs).
func duKiB(t *testing.T, mnt string) int64 {
	t.Helper()
	out, err := exec.Command("df", "-k", "--output=used", mnt).Output()
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(out))
	n, err := strconv.ParseInt(f[len(f)-1], 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
