package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/storectl/storectl/internal/testutil"
)

// Tests of the CLI on hostile data dirs and in hostile surroundings
// (issue 21): FIFOs in place of store files, live probes that cannot see
// the broker, two writers at once. Each runs storectl as a child process
// (the test binary re-executed, STORECTL_TEST_MAIN=1) under a deadline, so
// a hang fails the test instead of stalling the suite.

// subDeadline bounds one storectl child: every command here takes well
// under a second on these fixtures.
const subDeadline = 30 * time.Second

// sub describes how to run one storectl child.
type sub struct {
	uid    int      // run as this uid/gid (0: as is)
	prefix []string // run under this command (e.g. unshare)
	env    []string
}

// testExe is the test binary itself, or, for a child that runs as
// another user (uid != 0), a copy in a world-readable dir (the build dir
// is 0700), made once per test and removed with it.
func testExe(t *testing.T, uid int) string {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if uid == 0 {
		return self
	}
	if p, ok := exeCopies.Load(t.Name()); ok {
		return p.(string)
	}
	b, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "storectl-exe-")
	if err == nil {
		err = os.Chmod(dir, 0o755)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir); exeCopies.Delete(t.Name()) })
	p := filepath.Join(dir, "storectl.test")
	if err := os.WriteFile(p, b, 0o755); err != nil {
		t.Fatal(err)
	}
	exeCopies.Store(t.Name(), p)
	return p
}

// exeCopies are testExe's copies, by test.
var exeCopies sync.Map

// run runs storectl args as s says and returns the exit code, stdout and
// stderr. A child still running at the deadline is killed and fails the
// test: that is a hang.
func (s sub) run(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), subDeadline)
	defer cancel()
	argv := append(append(append([]string(nil), s.prefix...), testExe(t, s.uid)), args...)
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = append(append(os.Environ(), "STORECTL_TEST_MAIN=1", "NO_COLOR=1"), s.env...)
	if s.uid != 0 {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(s.uid), Gid: uint32(s.uid)}}
	}
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("storectl %s: still running after %s (a hang); stderr:\n%s", strings.Join(args, " "), subDeadline, errOut.String())
	}
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("storectl %s: %v", strings.Join(args, " "), err)
	}
	return code, out.String(), errOut.String()
}

// summaryOf checks that the last line of a JSONL report is the summary
// and carries the process's exit code, and returns it.
func summaryOf(t *testing.T, code int, out string) map[string]any {
	t.Helper()
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	var sum map[string]any
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &sum); err != nil || sum["type"] != "summary" {
		t.Fatalf("last line is not a summary (%v):\n%s", err, out)
	}
	if got := int(sum["exit_code"].(float64)); got != code {
		t.Fatalf("summary exit_code %d, process exit %d", got, code)
	}
	return sum
}

// fixture unpacks a testdata tarball into a new temp dir (that another
// user may enter).
func fixture(t *testing.T, tarball string) string {
	t.Helper()
	dir := t.TempDir()
	for _, d := range []string{filepath.Dir(dir), dir} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := testutil.UntarTo(testutil.Testdata(tarball), dir); err != nil {
		t.Fatal(err)
	}
	return dir
}

// mkfifo replaces path by a named pipe nobody writes to.
// dirInPlace puts an empty directory where the file at path was: a store
// file storectl cannot read.
func dirInPlace(t *testing.T, path string) {
	t.Helper()
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(path, 0o755); err != nil {
		t.Fatal(err)
	}
}

func mkfifo(t *testing.T, path string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(path, 0o644); err != nil {
		t.Fatal(err)
	}
}

const (
	rabbitVHost = "rmqfix@localhost/msg_stores/vhosts/628WB79CIFDYO9LJI6DKMI09L"
	rabbit40    = "rmq40@localhost"
)

// TestFIFOsNeverBlock: a named pipe in place of a file any command opens
// (the RocketMQ lock, checkpoint and topics.json, the RabbitMQ clean.dot,
// .vhost and pid files) makes no command hang: each ends in time with its
// summary last, the pipe inside the data dir is a storectl.file.not-regular
// finding, and writers refuse (issue 21, defect 4: every command used to
// block in open(2), SIGINT ignored).
func TestFIFOsNeverBlock(t *testing.T) {
	type tcase struct {
		fixture, data, fifo string
		inside              bool // the pipe is inside the data dir (not a pid file beside it)
		cmds                [][]string
	}
	rocket := [][]string{{"scan"}, {"verify"}, {"truncate"}, {"rebuild-index"}, {"truncate", "--apply", "--yes"}}
	rabbit := [][]string{{"scan"}, {"verify"}, {"truncate"}, {"harden", "--broker-version", "3.10.8"}, {"rebuild-index", "--apply", "--yes"}}
	streams := [][]string{{"scan"}, {"verify"}, {"truncate"}, {"rebuild-index", "--apply", "--yes"}}
	cases := []tcase{
		{"rocketmq/rmq533-c-stale.tar.gz", "store", "store/lock", true, rocket},
		{"rocketmq/rmq533-c-stale.tar.gz", "store", "store/checkpoint", true, rocket},
		{"rocketmq/rmq533-c-stale.tar.gz", "store", "store/config/topics.json", true, rocket},
		{"rabbitmq/datasets/clean-shutdown.tar.gz", "rmqfix@localhost", rabbitVHost + "/msg_store_persistent/clean.dot", true, rabbit},
		{"rabbitmq/datasets/clean-shutdown.tar.gz", "rmqfix@localhost", rabbitVHost + "/.vhost", true, rabbit},
		{"rabbitmq/datasets/clean-shutdown.tar.gz", "rmqfix@localhost", "rmqfix@localhost.pid", false, rabbit},
		{"rabbitmq/datasets/clean-shutdown.tar.gz", "rmqfix@localhost", "rmqfix@localhost/rabbit.pid", true, rabbit},
		// the stream scanner reads the vhost names and the feature flags
		// beside the node (it blocked on both)
		{"rabbitmq-4.0-qq-stream/datasets/S1.tar.gz", rabbit40, rabbit40 + "/msg_stores/vhosts/628WB79CIFDYO9LJI6DKMI09L/.vhost", true, streams},
		{"rabbitmq-4.0-qq-stream/datasets/S1.tar.gz", rabbit40, rabbit40 + "-feature_flags", false, streams[:3]}, // beside the data dir: writers go on
	}
	for _, c := range cases {
		t.Run(strings.ReplaceAll(c.fifo, "/", "_"), func(t *testing.T) {
			dir := fixture(t, c.fixture)
			mkfifo(t, filepath.Join(dir, c.fifo))
			for _, cmd := range c.cmds {
				args := append(append([]string(nil), cmd...), "-o", "jsonl", filepath.Join(dir, c.data))
				code, out, errOut := sub{}.run(t, args...)
				sum := summaryOf(t, code, out)
				apply := strings.Contains(strings.Join(cmd, " "), "--apply")
				switch {
				case apply && code != exitRefused:
					t.Errorf("%v: exit %d, want 4 (refused)\n%s%s", cmd, code, out, errOut)
				case code == exitOK && c.inside:
					t.Errorf("%v: exit 0 with a FIFO in the data dir\n%s", cmd, out)
				}
				if c.inside && !strings.Contains(out, `"code":"storectl.file.not-regular"`) {
					t.Errorf("%v: no storectl.file.not-regular finding\n%s", cmd, out)
				}
				if !c.inside && apply && !strings.Contains(out, "could not tell whether a broker uses the data dir") {
					t.Errorf("%v: an unreadable pid file must leave the live check undecided\n%s", cmd, out)
				}
				_ = sum
			}
		})
	}
}

// holdOpen opens path in this (the test) process and keeps it open until
// the test ends: a broker's open file, held by another process than
// storectl's.
func holdOpen(t *testing.T, path string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
}

// chownTree gives uid/gid the whole tree under dir.
func chownTree(t *testing.T, dir string, uid int) {
	t.Helper()
	err := filepath.Walk(dir, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, uid, uid)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestLiveProbeCannotSee: the /proc scan cannot see a broker that another
// user runs, or that runs outside storectl's PID namespace; the writers
// used to report "live": false and apply (issue 21, defect 5). Now a file
// another process holds open is found with a lease, and where nothing can
// be probed the run record says the check is undecided and writers refuse
// without --force.
func TestLiveProbeCannotSee(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root: runs storectl as nobody and in a new PID namespace")
	}
	const nobody = 65534
	harden := func(dir string, extra ...string) []string {
		return append(append([]string{"harden", "--broker-version", "3.10.8", "--apply", "--yes", "-o", "jsonl",
			"--backup-dir", filepath.Join(dir, "bk")}, extra...), filepath.Join(dir, rabbit40))
	}
	rdq := rabbit40 + "/msg_stores/vhosts/628WB79CIFDYO9LJI6DKMI09L/msg_store_persistent/2.rdq"

	t.Run("other-user", func(t *testing.T) {
		// A root process holds 2.rdq open; storectl runs as nobody on a
		// nobody-owned copy: /proc/<root pid>/fd is unreadable to it.
		dir := fixture(t, "rabbitmq-4.0/datasets/crash.tar.gz")
		chownTree(t, dir, nobody)
		before := hashTree(t, dir)
		holdOpen(t, filepath.Join(dir, rdq))
		code, out, errOut := sub{uid: nobody}.run(t, harden(dir)...)
		summaryOf(t, code, out)
		if code != exitRefused || !strings.Contains(out, `"live":true`) {
			t.Fatalf("exit %d, want 4 with live:true\n%s%s", code, out, errOut)
		}
		if after := hashTree(t, dir); !equalTrees(before, after) {
			t.Fatal("the refused apply changed the tree")
		}
	})

	t.Run("pid-namespace", func(t *testing.T) {
		// storectl in a new PID namespace with its own /proc: the holder and
		// the pid its node.pid names are invisible there.
		if err := exec.Command("unshare", "-p", "-f", "--mount-proc", "true").Run(); err != nil {
			t.Skipf("unshare -p -f --mount-proc does not work here: %v", err)
		}
		dir := fixture(t, "rabbitmq-4.0/datasets/crash.tar.gz")
		holdOpen(t, filepath.Join(dir, rdq))
		if err := os.WriteFile(filepath.Join(dir, rabbit40+".pid"), []byte(fmt.Sprintf("%d\n", os.Getpid())), 0o644); err != nil {
			t.Fatal(err)
		}
		before := hashTree(t, dir)
		code, out, errOut := sub{prefix: []string{"unshare", "-p", "-f", "--mount-proc"}}.run(t, harden(dir)...)
		summaryOf(t, code, out)
		if code != exitRefused || !strings.Contains(out, `"live":true`) {
			t.Fatalf("exit %d, want 4 with live:true\n%s%s", code, out, errOut)
		}
		if after := hashTree(t, dir); !equalTrees(before, after) {
			t.Fatal("the refused apply changed the tree")
		}
	})

	t.Run("undecided", func(t *testing.T) {
		// nobody on a root-owned copy: no lease can be taken on files it
		// does not own, so nothing rules a broker out.
		dir := fixture(t, "rabbitmq-4.0/datasets/crash.tar.gz")
		if err := os.Chmod(dir, 0o777); err != nil { // room for the backup dir and lock
			t.Fatal(err)
		}
		before := hashTree(t, dir)
		code, out, errOut := sub{uid: nobody}.run(t, "verify", "-o", "jsonl", filepath.Join(dir, rabbit40))
		summaryOf(t, code, out)
		if !strings.Contains(out, `"live_undecided":true`) || !strings.Contains(out, `"live_warnings":[`) {
			t.Fatalf("verify: the run record does not say the live check is undecided\n%s%s", out, errOut)
		}
		code, out, errOut = sub{uid: nobody}.run(t, harden(dir)...)
		summaryOf(t, code, out)
		if code != exitRefused || !strings.Contains(out, "could not tell whether a broker uses the data dir") {
			t.Fatalf("exit %d, want 4 (undecided)\n%s%s", code, out, errOut)
		}
		if after := hashTree(t, dir); !equalTrees(before, after) {
			t.Fatal("the refused apply changed the tree")
		}
		// --force goes past the live gate (and then fails on the root-owned
		// files: nobody may not write them).
		code, out, _ = sub{uid: nobody}.run(t, harden(dir, "--force")...)
		if code == exitRefused || strings.Contains(out, "could not tell") {
			t.Fatalf("--force: exit %d, still refused by the live gate\n%s", code, out)
		}
	})
}

func hashTree(t *testing.T, dir string) map[string]string {
	t.Helper()
	h, err := testutil.HashTree(dir)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func equalTrees(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// TestTwoWriters starts two writers on one data dir at the same moment,
// for each writer and for undo: exactly one applies, the other exits 4
// naming the holder (its pid) and writes nothing; the winner's backup then
// undoes to the original bytes. Each writer waits at its first write
// step until one of the two has exited, so the two always overlap, on
// any host; two writers that both got past the lock wait for each other
// until the deadline fails the test.
func TestTwoWriters(t *testing.T) {
	type tcase struct {
		name, fixture, data string
		args                []string
		remove              string // removed before the run, for the writer to recreate
	}
	cases := []tcase{
		{"truncate", "rocketmq/rmq533-c-stale.tar.gz", "store", []string{"truncate"}, ""},
		{"rebuild-index", "rocketmq/rmq533-a-clean.tar.gz", "store", []string{"rebuild-index", "--cq-file-size", "1000"}, "store/consumequeue"},
		{"harden", "rabbitmq-4.0/datasets/crash.tar.gz", rabbit40, []string{"harden", "--broker-version", "3.10.8"}, ""},
	}
	pairs := 0
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := fixture(t, c.fixture)
			data := filepath.Join(dir, c.data)
			if c.remove != "" {
				if err := os.RemoveAll(filepath.Join(dir, c.remove)); err != nil {
					t.Fatal(err)
				}
			}
			before := hashTree(t, dir)
			backups := []string{filepath.Join(t.TempDir(), "bk1"), filepath.Join(t.TempDir(), "bk2")}
			type result struct {
				code     int
				out, err string
			}
			both := func(argv func(i int) []string) [2]result {
				var rs [2]result
				release := filepath.Join(t.TempDir(), "release")
				pause := sub{env: []string{"STORECTL_TEST_PAUSE_UNTIL=" + release}}
				done := make(chan int, 2)
				for i := range rs {
					go func() {
						rs[i].code, rs[i].out, rs[i].err = pause.run(t, argv(i)...)
						done <- i
					}()
				}
				<-done // one has exited (refused): let the other go on
				if err := os.WriteFile(release, nil, 0o644); err != nil {
					t.Error(err)
				}
				<-done
				return rs
			}
			check := func(what string, rs [2]result) int {
				win := -1
				for i, r := range rs {
					summaryOf(t, r.code, r.out)
					switch r.code {
					case exitOK:
						if win >= 0 {
							t.Fatalf("%s: both writers exited 0", what)
						}
						if !strings.Contains(r.out, `"status":"applied"`) && !strings.Contains(r.out, `"status":"restored"`) {
							t.Fatalf("%s: the writer that exited 0 changed nothing:\n%s", what, r.out)
						}
						win = i
					case exitRefused:
						if !strings.Contains(r.out, "another storectl writer is working on this data dir") || !strings.Contains(r.out, "pid ") {
							t.Fatalf("%s: the refusal does not name the holder:\n%s", what, r.out)
						}
					default:
						t.Fatalf("%s: exit %d\n%s%s", what, r.code, r.out, r.err)
					}
				}
				if win < 0 {
					t.Fatalf("%s: neither writer applied:\n%s\n%s", what, rs[0].out, rs[1].out)
				}
				pairs++
				return win
			}
			for round := 0; round < 2; round++ {
				rs := both(func(i int) []string {
					return append(append([]string(nil), c.args...), "--apply", "--yes", "-o", "jsonl", "--backup-dir", backups[i], data)
				})
				win := check("apply", rs)
				if _, err := os.Stat(backups[1-win]); err == nil {
					t.Fatalf("the refused writer made a backup dir")
				}
				// two undos of the winner's backup at once
				rs = both(func(int) []string { return []string{"undo", "--apply", "--yes", "-o", "jsonl", backups[win]} })
				check("undo", rs)
				if after := hashTree(t, dir); !equalTrees(before, after) {
					t.Fatalf("round %d: after apply and undo the tree differs from the original", round)
				}
				os.RemoveAll(backups[win])
			}
		})
	}
	t.Logf("%d concurrent pairs: each time exactly one applied and the other exited 4", pairs)
}

// TestSalvageFIFOInPlaceOfDataFile: a named pipe where a store keeps a
// data file (a stream segment, a DLedger data file, an .rdq, a commitlog
// file) is never opened by salvage, so what the store kept under that
// name is not in the export: salvage reports the storectl.file.not-regular
// finding, as scan and verify do, and does not exit 0 ("everything
// selected was exported"). The stream and DLedger cases exited 0 with no
// word of the pipe.
func TestSalvageFIFOInPlaceOfDataFile(t *testing.T) {
	for _, c := range []struct{ fixture, data, fifo string }{
		{"rabbitmq-4.0-qq-stream/datasets/S1.tar.gz", rabbit40, rabbit40 + "/stream/__s1b_1796159969576203809/00000000000000000000.segment"},
		{"rocketmq-5x/rmq533-dl2-kill.tar.gz", "store", "store/dledger-n0/data/00000000000000262144"},
		{"rabbitmq/datasets/crash.tar.gz", "rmqfix@localhost", rabbitVHost + "/msg_store_persistent/18.rdq"},
		{"rocketmq/rmq533-c-stale.tar.gz", "store", "store/commitlog/00000000000000262144"},
	} {
		t.Run(strings.ReplaceAll(c.fifo, "/", "_"), func(t *testing.T) {
			dir := fixture(t, c.fixture)
			mkfifo(t, filepath.Join(dir, c.fifo))
			code, out, errOut := sub{}.run(t, "salvage", "--out", filepath.Join(t.TempDir(), "out"), "-o", "jsonl", filepath.Join(dir, c.data))
			summaryOf(t, code, out)
			if code == exitOK || !strings.Contains(out, `"code":"storectl.file.not-regular"`) {
				t.Fatalf("exit %d, want a storectl.file.not-regular finding and not 0\n%s%s", code, out, errOut)
			}
		})
	}
}
