package live

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// helperEnv makes the test binary act as a broker stand-in: "<mode>:<path>".
const helperEnv = "STORECTL_LIVE_TEST_HELPER"

// wait bounds every wait on the helper, so a broken test fails, never hangs.
const wait = 10 * time.Second

func TestMain(m *testing.M) {
	if v := os.Getenv(helperEnv); v != "" {
		os.Exit(helper(v))
	}
	os.Exit(m.Run())
}

// helper takes the resource, says "ready", and holds it until stdin closes.
func helper(spec string) int {
	mode, path, _ := strings.Cut(spec, ":")
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		fmt.Println("error:", err)
		return 1
	}
	switch mode {
	case "posix-lock": // what Java's FileChannel.tryLock(0, 1, false) does
		lk := unix.Flock_t{Type: unix.F_WRLCK, Whence: io.SeekStart, Start: 0, Len: 1}
		err = unix.FcntlFlock(f.Fd(), unix.F_SETLK, &lk)
	case "ofd-lock":
		lk := unix.Flock_t{Type: unix.F_WRLCK, Whence: io.SeekStart, Start: 0, Len: 0}
		err = unix.FcntlFlock(f.Fd(), unix.F_OFD_SETLK, &lk)
	case "mmap": // map, then close the descriptor: only /proc/<pid>/maps shows it
		_, err = unix.Mmap(int(f.Fd()), 0, 4096, unix.PROT_READ, unix.MAP_SHARED)
		f.Close()
	case "open":
	default:
		err = fmt.Errorf("unknown mode %q", mode)
	}
	if err != nil {
		fmt.Println("error:", err)
		return 1
	}
	fmt.Println("ready")
	io.Copy(io.Discard, os.Stdin)
	return 0
}

// startHelper runs the helper and returns its pid and a stop function that
// waits (bounded) for it to exit.
func startHelper(t *testing.T, mode, path string) (pid int, stop func()) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"="+mode+":"+path)
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		stdin.Close()
		select {
		case <-done:
		case <-time.After(wait):
			cmd.Process.Kill()
			<-done
			t.Errorf("helper %s did not exit in %v", mode, wait)
		}
	}
	line := make(chan string, 1)
	go func() {
		s, _ := bufio.NewReader(stdout).ReadString('\n')
		line <- s
		io.Copy(io.Discard, stdout)
		done <- cmd.Wait()
	}()
	t.Cleanup(stop)
	select {
	case s := <-line:
		if strings.TrimSpace(s) != "ready" {
			t.Fatalf("helper %s: %q", mode, s)
		}
	case <-time.After(wait):
		t.Fatalf("helper %s not ready in %v", mode, wait)
	}
	return cmd.Process.Pid, stop
}

// rocketStore makes <tmp>/store with a lock file and a commitlog file.
func rocketStore(t *testing.T) string {
	t.Helper()
	root := filepath.Join(t.TempDir(), "store")
	os.MkdirAll(filepath.Join(root, "commitlog"), 0o755)
	os.WriteFile(filepath.Join(root, "lock"), nil, 0o644)
	os.WriteFile(filepath.Join(root, "commitlog", "00000000000000000000"), make([]byte, 8192), 0o644)
	return root
}

func TestLockHeldPosixLock(t *testing.T) {
	root := rocketStore(t)
	lock := filepath.Join(root, "lock")
	if held, _, err := LockHeld(lock); err != nil || held {
		t.Fatalf("before: held=%v err=%v", held, err)
	}
	pid, stop := startHelper(t, "posix-lock", lock)
	held, got, err := LockHeld(lock)
	if err != nil || !held || got != pid {
		t.Fatalf("locked: held=%v pid=%d err=%v, want held by %d", held, got, err, pid)
	}
	st, err := Detect(root, RocketMQ)
	if err != nil || !st.Live || !strings.Contains(strings.Join(st.Reasons, "\n"), fmt.Sprintf("locked by process %d", pid)) {
		t.Fatalf("Detect: %+v %v", st, err)
	}
	stop()
	if held, _, err := LockHeld(lock); err != nil || held {
		t.Fatalf("after exit: held=%v err=%v", held, err)
	}
	if st, err := Detect(root, RocketMQ); err != nil || st.Live {
		t.Fatalf("Detect after exit: %+v %v", st, err)
	}
}

// TestLockHeldOFDLock: the kernel reports pid -1 for an OFD lock; the holder
// is found through /proc instead.
func TestLockHeldOFDLock(t *testing.T) {
	lock := filepath.Join(rocketStore(t), "lock")
	pid, stop := startHelper(t, "ofd-lock", lock)
	held, got, err := LockHeld(lock)
	if err != nil || !held || got != pid {
		t.Fatalf("held=%v pid=%d err=%v, want held by %d", held, got, err, pid)
	}
	stop()
	if held, _, _ := LockHeld(lock); held {
		t.Fatal("still held after exit")
	}
}

func TestLockHeldMissingFile(t *testing.T) {
	if _, _, err := LockHeld(filepath.Join(t.TempDir(), "nope")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("err %v", err)
	}
}

func TestOpenBy(t *testing.T) {
	for _, mode := range []string{"open", "mmap"} {
		t.Run(mode, func(t *testing.T) {
			root := rocketStore(t)
			file := filepath.Join(root, "commitlog", "00000000000000000000")
			self, _ := os.Open(file) // our own descriptor must not count
			defer self.Close()
			if hs, err := OpenBy(root); err != nil || len(hs) != 0 {
				t.Fatalf("before: %v %v", hs, err)
			}
			pid, stop := startHelper(t, mode, file)
			hs, err := OpenBy(root)
			want := Holder{PID: pid, Path: file, Via: map[string]string{"open": "fd", "mmap": "mmap"}[mode]}
			if err != nil || len(hs) != 1 || hs[0].PID != want.PID || hs[0].Path != want.Path || hs[0].Via != want.Via || hs[0].Command == "" {
				t.Fatalf("OpenBy = %+v, %v; want %+v", hs, err, want)
			}
			if hs, _ := OpenBy(filepath.Join(root, "commitlog") + "x"); len(hs) != 0 { // a sibling prefix is not inside
				t.Fatalf("prefix match: %+v", hs)
			}
			st, err := Detect(root, RabbitMQ)
			if err != nil || !st.Live || !strings.Contains(st.Reasons[0], "process "+strconv.Itoa(pid)) {
				t.Fatalf("Detect: %+v %v", st, err)
			}
			stop()
			if hs, err := OpenBy(root); err != nil || len(hs) != 0 {
				t.Fatalf("after exit: %v %v", hs, err)
			}
		})
	}
}

func TestPidFileAlive(t *testing.T) {
	dir := t.TempDir()
	write := func(s string) string {
		p := filepath.Join(dir, "rabbit@host.pid")
		os.WriteFile(p, []byte(s), 0o644)
		return p
	}
	if alive, pid := PidFileAlive(write(strconv.Itoa(os.Getpid()) + "\n")); !alive || pid != os.Getpid() {
		t.Fatalf("own pid: %v %d", alive, pid)
	}
	for _, s := range []string{"", "abc", "0", "-5", "12 34", strings.Repeat("1", 100)} {
		if alive, _ := PidFileAlive(write(s)); alive {
			t.Errorf("%q: alive", s)
		}
	}
	if alive, _ := PidFileAlive(filepath.Join(dir, "missing.pid")); alive {
		t.Error("missing file: alive")
	}
	// A pid file beside the node dir, naming a process that then exits.
	node := filepath.Join(dir, "rabbit@host")
	os.Mkdir(node, 0o755)
	os.WriteFile(filepath.Join(node, "x"), []byte("x"), 0o644)
	pid, stop := startHelper(t, "open", filepath.Join(dir, "rabbit@host.pid"))
	write(strconv.Itoa(pid))
	st, err := Detect(node, RabbitMQ)
	if err != nil || !st.Live || !strings.Contains(strings.Join(st.Reasons, "\n"), "running process "+strconv.Itoa(pid)) {
		t.Fatalf("Detect: %+v %v", st, err)
	}
	stop()
	if alive, _ := PidFileAlive(filepath.Join(dir, "rabbit@host.pid")); alive {
		t.Fatal("exited process still alive")
	}
	if st, _ := Detect(node, RabbitMQ); st.Live {
		t.Fatalf("Detect after exit: %+v", st)
	}
}

func TestDetectUnknownKind(t *testing.T) {
	if _, err := Detect(t.TempDir(), "kafka"); err == nil {
		t.Fatal("no error")
	}
}
