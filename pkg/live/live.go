// Package live tells whether a broker is using a data dir, without ever
// blocking or taking a lock: a POSIX record lock on RocketMQ's <root>/lock,
// processes with files of the dir open or mapped (/proc), and a RabbitMQ pid
// file naming a running process (docs/cli.md, "Live brokers").
//
// Every probe errs towards "live": a stale pid file whose pid was reused
// counts as live, because writers refuse on live and a false refusal costs
// a retry while a false "not live" costs data.
package live

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/storectl/storectl/internal/storefile"
)

// Store kinds Detect knows.
const (
	RocketMQ = "rocketmq"
	RabbitMQ = "rabbitmq"
)

// maxPidFile bounds what PidFileAlive reads: a pid is at most 7 digits on
// Linux (pid_max <= 2^22); 64 bytes leave room for a newline and spaces and
// keep a huge or wrong file from being read whole.
const maxPidFile = 64

// Status is Detect's verdict. Reasons says why the store looks live, one
// sentence each; Warnings says what could not be checked. Undecided is set
// when a warning means a live broker could have gone unseen: writers then
// refuse without --force.
type Status struct {
	Live      bool     `json:"live"`
	Reasons   []string `json:"reasons,omitempty"`
	Warnings  []string `json:"warnings,omitempty"`
	Undecided bool     `json:"undecided,omitempty"`
}

// Detect runs the probes for kind ("rocketmq", "rabbitmq", or "" for all)
// on dataDir. RocketMQ: the lock on <dataDir>/lock and open files. RabbitMQ:
// open files and a pid file (<dataDir>.pid, as RabbitMQ writes it beside
// the node's mnesia dir, or <dataDir>/*.pid). An error means a probe could
// not run at all (no /proc, unreadable dataDir).
func Detect(dataDir string, kind string) (Status, error) {
	return DetectWith(dataDir, kind, Options{})
}

// Options tune DetectWith.
type Options struct {
	// Ignore, when set, is asked about each process found with a file of
	// the data dir open; the files of those it accepts make nothing live
	// (the CLI: other storectl processes, which are not brokers and whose
	// writers the writer lock serialises).
	Ignore func(pid int) bool
}

// DetectWith is Detect with options.
func DetectWith(dataDir string, kind string, o Options) (Status, error) {
	var st Status
	if kind != "" && kind != RocketMQ && kind != RabbitMQ {
		return st, fmt.Errorf("live: unknown store kind %q", kind)
	}
	root, err := realPath(dataDir)
	if err != nil {
		return st, err
	}
	if kind != RabbitMQ {
		lockFile := filepath.Join(root, "lock")
		held, pid, err := LockHeld(lockFile)
		switch {
		case err == nil && held:
			st.Reasons = append(st.Reasons, fmt.Sprintf("%s is locked by %s", lockFile, pidWord(pid)))
		case err != nil && !errors.Is(err, fs.ErrNotExist):
			st.Warnings = append(st.Warnings, fmt.Sprintf("could not probe the lock on %s: %v", lockFile, err))
			st.Undecided = true
		}
	}
	hs, denied, err := openBy(root)
	if err != nil {
		return st, fmt.Errorf("live: scanning /proc: %w", err)
	}
	kept := hs
	if o.Ignore != nil {
		kept = nil
		for _, h := range hs {
			if !o.Ignore(h.PID) {
				kept = append(kept, h)
			}
		}
	}
	st.Reasons = append(st.Reasons, holderReasons(root, kept)...)
	if seesAll, why := procSeesAll(); !seesAll || denied > 0 {
		if denied > 0 {
			why = strings.TrimPrefix(why+fmt.Sprintf("; could not see the open files of %d processes of other users", denied), "; ")
		}
		leaseCheck(&st, root, hs, why)
	}
	if kind != RocketMQ {
		for _, pf := range pidFiles(root) {
			if alive, pid := PidFileAlive(pf); alive {
				st.Reasons = append(st.Reasons, fmt.Sprintf("pid file %s names running process %d", pf, pid))
			} else if _, err := os.Lstat(pf); err == nil {
				if _, err := storefile.ReadFileLimit(pf, maxPidFile); err != nil {
					st.Warnings = append(st.Warnings, fmt.Sprintf("could not read the pid file %s: %v", pf, err))
					st.Undecided = true
				}
			}
		}
	}
	st.Live = len(st.Reasons) > 0
	return st, nil
}

// leaseCheck completes a /proc scan that cannot see every process (why)
// with leaseProbe: a file another process has open makes the store live;
// files it could not probe leave the verdict undecided.
func leaseCheck(st *Status, root string, seen []Holder, why string) {
	lr, err := leaseProbe(root)
	if err != nil {
		st.Undecided = true
		st.Warnings = append(st.Warnings, fmt.Sprintf("%s, and the files could not be checked with leases: %v", why, err))
		return
	}
	known := map[string]bool{}
	for _, h := range seen {
		known[h.Path] = true
	}
	n := 0
	for _, p := range lr.open {
		if !known[p] {
			n++
		}
	}
	if n > 0 {
		first := ""
		for _, p := range lr.open {
			if !known[p] {
				first, _ = filepath.Rel(root, p)
				break
			}
		}
		st.Reasons = append(st.Reasons, fmt.Sprintf("%d file(s) of the data dir are open in a process this user or namespace cannot see (the kernel refused a write lease), e.g. %s", n, first))
	}
	if lr.unprobed > 0 {
		st.Undecided = true
		st.Warnings = append(st.Warnings, fmt.Sprintf("%s, and %d of %d file(s) could not be checked with a lease instead (e.g. %s): a broker using them would not be seen (run as root on the host, or as the files' owner)",
			why, lr.unprobed, lr.files, lr.example))
	}
}

// holderReasons gives one reason per process, naming one of its files.
func holderReasons(root string, hs []Holder) []string {
	type agg struct {
		comm, first string
		n           int
	}
	by := map[int]*agg{}
	var pids []int
	for _, h := range hs {
		a := by[h.PID]
		if a == nil {
			rel, _ := filepath.Rel(root, h.Path)
			a = &agg{comm: h.Command, first: rel}
			by[h.PID] = a
			pids = append(pids, h.PID)
		}
		a.n++
	}
	sort.Ints(pids)
	var out []string
	for _, pid := range pids {
		a := by[pid]
		out = append(out, fmt.Sprintf("process %d (%s) has %d file(s) of the data dir open, e.g. %s", pid, a.comm, a.n, a.first))
	}
	return out
}

// pidFiles lists the candidate RabbitMQ pid files of root.
func pidFiles(root string) []string {
	out := []string{root + ".pid"}
	inside, _ := filepath.Glob(filepath.Join(root, "*.pid"))
	return append(out, inside...)
}

// PidFileAlive reads a pid file and reports whether its process exists
// (kill(pid, 0) succeeds or is refused with EPERM). A missing, empty or
// malformed file, or a pid <= 0, gives false and pid 0.
func PidFileAlive(path string) (alive bool, pid int) {
	f, err := storefile.Open(path)
	if err != nil {
		return false, 0
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxPidFile))
	if err != nil {
		return false, 0
	}
	first, _, _ := strings.Cut(string(b), "\n")
	pid, err = strconv.Atoi(strings.TrimSpace(first))
	if err != nil || pid <= 0 {
		return false, 0
	}
	err = unix.Kill(pid, 0)
	return err == nil || errors.Is(err, unix.EPERM), pid
}

func pidWord(pid int) string {
	if pid > 0 {
		return fmt.Sprintf("process %d", pid)
	}
	return "another process (pid unknown: an OFD lock)"
}
