package main

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/storectl/storectl/internal/testutil"
	"github.com/storectl/storectl/pkg/scan"
)

// treeState describes every entry under dir (the dir itself included):
// type and permission bits, size and mtime (nanoseconds), the SHA-256 of
// a regular file, the target of a symlink. A file made and removed again
// inside a directory still changes that directory's mtime, so a temp
// file written into the data dir and unlinked shows too.
func treeState(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		s := fmt.Sprintf("%v size=%d mtime=%d", fi.Mode(), fi.Size(), fi.ModTime().UnixNano())
		switch {
		case fi.Mode().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			h := sha256.Sum256(b)
			s += " sha256=" + hex.EncodeToString(h[:])
		case fi.Mode()&fs.ModeSymlink != 0:
			l, err := os.Readlink(p)
			if err != nil {
				return err
			}
			s += " -> " + l
		}
		out[filepath.ToSlash(rel)] = s
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// sameState fails t with every entry that was added, removed or changed.
func sameState(t *testing.T, what string, before, after map[string]string) {
	t.Helper()
	var diffs []string
	for k, v := range before {
		if w, ok := after[k]; !ok {
			diffs = append(diffs, "removed "+k)
		} else if w != v {
			diffs = append(diffs, fmt.Sprintf("changed %s: %s -> %s", k, v, w))
		}
	}
	for k := range after {
		if _, ok := before[k]; !ok {
			diffs = append(diffs, "added "+k+": "+after[k])
		}
	}
	sort.Strings(diffs)
	if len(diffs) > 0 {
		t.Errorf("%s changed the tree of the data dir:\n%s", what, strings.Join(diffs, "\n"))
	}
}

// TestReadOnlyCommandsWriteNothing runs every command without --apply
// (scan and verify, with and without --records; the dry runs of
// truncate, rebuild-index and harden; salvage into an --out outside;
// undo of a dir that is no backup) on a copy of one fixture of each store
// kind, and checks that the tree the data dir lives in (its siblings
// too: a backup or temp dir beside it) is entry for entry, byte for byte
// and mtime for mtime what it was. Temp files go to --tmp-dir / $TMPDIR,
// never the data dir (docs/cli.md, "Writers: dry run first").
func TestReadOnlyCommandsWriteNothing(t *testing.T) {
	fixtures := []struct {
		name, tgz, data string
		rabbit          bool
	}{
		{"rocketmq-stale", testutil.Testdata("rocketmq", "rmq533-c-stale.tar.gz"), "store", false},
		{"rocketmq-torn", testutil.Testdata("rocketmq", "rmq533-d-torn-crc.tar.gz"), "store", false},
		{"rocketmq5x-timer", testutil.Testdata("rocketmq-5x", "rmq533-t2-kill.tar.gz"), "store", false},
		{"rocketmq5x-dledger", testutil.Testdata("rocketmq-5x", "rmq533-dl2-kill.tar.gz"), "store", false},
		{"rabbitmq-classic-v1", testutil.Testdata("rabbitmq", "datasets", "crash.tar.gz"), "rmqfix@localhost", true},
		{"rabbitmq-classic-v2", testutil.Testdata("rabbitmq", "datasets", "crash-cqv2.tar.gz"), "rmqfix@localhost", true},
		{"rabbitmq-quorum-3.10", testutil.Testdata("rabbitmq-3.10-qq", "datasets", "R1.tar.gz"), "rmq310@localhost", true},
		{"rabbitmq-stream-3.10", testutil.Testdata("rabbitmq-3.10-stream", "datasets", "T1.tar.gz"), "rmq310@localhost", true},
		{"rabbitmq-quorum-4.0", testutil.Testdata("rabbitmq-4.0-qq-stream", "datasets", "Q2.tar.gz"), "rmq40@localhost", true},
		{"rabbitmq-stream-4.0", testutil.Testdata("rabbitmq-4.0-qq-stream", "datasets", "S1.tar.gz"), "rmq40@localhost", true},
	}
	for _, fx := range fixtures {
		t.Run(fx.name, func(t *testing.T) {
			root := testutil.Untar(t, fx.tgz)
			data := filepath.Join(root, fx.data)
			outs := t.TempDir() // salvage exports and plans: outside root
			tmp := t.TempDir()
			t.Cleanup(func() { scan.SetTempDir("") }) // --tmp-dir set it for this process
			cmds := [][]string{
				{"scan"}, {"scan", "--records"}, {"verify"}, {"verify", "--records"},
				{"truncate"}, {"rebuild-index"},
				{"truncate", "--plan-out", filepath.Join(outs, "truncate-plan.json")},
				{"salvage", "--out", filepath.Join(outs, "all")},
				{"salvage", "--select", "lost", "--out", filepath.Join(outs, "lost")},
				{"salvage", "--select", "after-corruption", "--out", filepath.Join(outs, "after")},
				{"undo"},
			}
			if fx.rabbit {
				cmds = append(cmds, []string{"harden"}, []string{"harden", "--broker-version", "3.13.1"},
					[]string{"salvage", "--select", "at-risk,unreferenced", "--out", filepath.Join(outs, "risk")})
			}
			for _, c := range cmds {
				for _, o := range []string{"jsonl"} { // text renders the same run
					args := append(append(append([]string{}, c...), "-o", o, "--tmp-dir", tmp), data)
					if c[0] == "salvage" {
						args[len(args)-1] = data // --out must be new for each run
						for i := range args {
							if args[i] == "--out" {
								args[i+1] += "-" + o
							}
						}
					}
					before := treeState(t, root)
					code, out, errOut := runCLI(t, args...)
					if code == exitIncomplete || code == exitApplyFailed || code == exitRefused {
						t.Errorf("%v: exit %d\n%s%s", args, code, tail(out), errOut)
					}
					sameState(t, strings.Join(args, " "), before, treeState(t, root))
				}
			}
		})
	}
}

// tail is the last 2000 bytes of s.
func tail(s string) string {
	if len(s) > 2000 {
		return s[len(s)-2000:]
	}
	return s
}

// TestDryRunsNeedNoWritableParent: a dry run writes nothing, so it works
// on a store whose data dir and parent the user may not write (a
// read-only copy, a broker's dir read by an operator account): run as
// nobody on a root-owned tree, truncate, rebuild-index and harden print
// their plan (exit 0 or 1). rebuild-index of a RocketMQ store (the
// commitlog's consume queues and index files, the 5.x DLedger index) used
// to stage the rebuilt files in a new dir beside the data dir even for a
// dry run, and exited 3 on "mkdir .store.storectl-stage-1: permission
// denied".
func TestDryRunsNeedNoWritableParent(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root: runs storectl as nobody on a root-owned tree (as root, permission bits do not bite)")
	}
	for _, fx := range []struct {
		name, tgz, data string
		rabbit          bool
	}{
		{"rocketmq", testutil.Testdata("rocketmq", "rmq533-c-stale.tar.gz"), "store", false},
		{"rocketmq5x-timer", testutil.Testdata("rocketmq-5x", "rmq533-t2-kill.tar.gz"), "store", false},
		{"rocketmq5x-dledger", testutil.Testdata("rocketmq-5x", "rmq533-dl2-kill.tar.gz"), "store", false},
		{"rabbitmq", testutil.Testdata("rabbitmq", "datasets", "crash.tar.gz"), "rmqfix@localhost", true},
		{"rabbitmq-quorum-stream", testutil.Testdata("rabbitmq-4.0-qq-stream", "datasets", "Q2.tar.gz"), "rmq40@localhost", true},
	} {
		t.Run(fx.name, func(t *testing.T) {
			root := readableTree(t, fx.tgz)
			data := filepath.Join(root, fx.data)
			cmds := [][]string{{"truncate"}, {"rebuild-index"}}
			if fx.rabbit {
				cmds = append(cmds, []string{"harden"})
			}
			for _, c := range cmds {
				before := treeState(t, root)
				args := append(append([]string{}, c...), "-o", "jsonl", data)
				code, out, errOut := runAsNobody(t, args...)
				if code != exitOK && code != exitFindings {
					t.Errorf("%v as nobody: exit %d, want the plan (0 or 1)\n%s%s", args, code, tail(out), errOut)
				}
				sameState(t, strings.Join(args, " "), before, treeState(t, root))
			}
		})
	}
}
