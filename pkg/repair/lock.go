package repair

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// ErrLocked is wrapped when another writer holds the data dir's writer
// lock: nothing was written.
var ErrLocked = errors.New("another storectl writer is working on this data dir")

// LockedError names the lock file and what its holder recorded in it.
type LockedError struct {
	Lock   string // the lock file
	Holder string // "pid 1234: storectl truncate --apply since 2026-12-01T23:25:10Z", or "unknown"
}

func (e *LockedError) Error() string {
	return fmt.Sprintf("%v (%s; lock %s)", ErrLocked, e.Holder, e.Lock)
}

// Unwrap makes errors.Is(err, ErrLocked) true.
func (e *LockedError) Unwrap() error { return ErrLocked }

// LockSuffix ends the name of a data dir's writer lock file.
const LockSuffix = ".storectl-lock"

// LockPath is the writer lock file of dataDir: beside it (never inside,
// where the broker would find a stray file), named .<base>.storectl-lock,
// for the data dir with symlinks resolved so that every spelling of one
// dir shares one lock.
func LockPath(dataDir string) (string, error) {
	real, err := filepath.EvalSymlinks(dataDir)
	if err != nil {
		return "", err
	}
	real, err = filepath.Abs(real)
	if err != nil {
		return "", err
	}
	return filepath.Join(filepath.Dir(real), "."+filepath.Base(real)+LockSuffix), nil
}

// WriterLock is a writer's exclusive hold on a data dir, from before its
// plan is checked until its apply (or undo) and re-verify are done. The
// kernel releases it when the process dies, however it dies: a crashed
// writer never leaves the data dir locked.
type WriterLock struct {
	f    *os.File
	Path string
}

// LockDataDir takes the writer lock of dataDir without waiting: an
// flock(2) LOCK_EX|LOCK_NB on LockPath, created if missing. who describes
// the holder; it is written into the file for the next writer's refusal to
// name. A lock held by another open of the file (another process, or
// another writer in this one) gives a *LockedError.
//
// Release removes the file before it lets go of the lock, so a finished
// writer leaves nothing beside the data dir; a writer that locked a file
// just removed sees that the path no longer names it and starts over. A
// killed writer leaves the file, unlocked: the next writer takes it.
func LockDataDir(dataDir, who string) (*WriterLock, error) {
	p, err := LockPath(dataDir)
	if err != nil {
		return nil, err
	}
	for try := 0; ; try++ {
		l, retry, err := lockOnce(p, who)
		if !retry || try >= 100 {
			return l, err
		}
	}
}

// lockOnce is one attempt of LockDataDir; retry is set when the file it
// locked was removed (or replaced) meanwhile.
func lockOnce(p, who string) (l *WriterLock, retry bool, err error) {
	// No symlink followed, no FIFO waited on: the lock file is beside a
	// data dir others may write to.
	f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0o600)
	if err != nil {
		return nil, false, fmt.Errorf("writer lock %s: %w", p, err)
	}
	st, err := f.Stat()
	if err == nil && !st.Mode().IsRegular() {
		err = errors.New("not a regular file")
	}
	if err != nil {
		f.Close()
		return nil, false, fmt.Errorf("writer lock %s: %w", p, err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		defer f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, false, &LockedError{Lock: p, Holder: holderOf(f, st)}
		}
		return nil, false, fmt.Errorf("writer lock %s: %w", p, err)
	}
	if now, err := os.Lstat(p); err != nil || !os.SameFile(st, now) {
		f.Close() // the holder removed it as it let go: lock the new one
		return nil, true, nil
	}
	holder := fmt.Sprintf("pid %d: %s since %s\n", os.Getpid(), who, time.Now().UTC().Format(time.RFC3339))
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(holder), 0) // a description only: the flock is the lock
	}
	return &WriterLock{f: f, Path: p}, false, nil
}

// holderOf names the holder of the lock on f (whose stat is st): the
// description it wrote, which can lag its flock by a moment (polled for
// up to 200 ms), else the pid /proc/locks gives for the file.
func holderOf(f *os.File, st os.FileInfo) string {
	for i := 0; i < 20; i++ {
		if h := readHolder(f); h != "" {
			return h
		}
		time.Sleep(10 * time.Millisecond)
	}
	if pid := flockHolder(st); pid > 0 {
		return fmt.Sprintf("pid %d", pid)
	}
	return "holder unknown"
}

// readHolder is the holder description in a lock file (its first line,
// at most 512 bytes), "" when there is none.
func readHolder(f *os.File) string {
	b := make([]byte, 512)
	n, _ := f.ReadAt(b, 0)
	line, _, _ := strings.Cut(string(b[:n]), "\n")
	return strings.TrimSpace(line)
}

// flockHolder is the pid /proc/locks names for a FLOCK on the file st
// describes ("1: FLOCK  ADVISORY  WRITE 4711 fd:01:1234 0 EOF"), 0 when
// none is listed or /proc/locks cannot be read.
func flockHolder(st os.FileInfo) int {
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return 0
	}
	b, err := os.ReadFile("/proc/locks")
	if err != nil {
		return 0
	}
	want := fmt.Sprintf(":%d", sys.Ino)
	for _, line := range strings.Split(string(b), "\n") {
		fs := strings.Fields(line)
		if len(fs) >= 6 && fs[1] == "FLOCK" && strings.HasSuffix(fs[5], want) {
			var pid int
			if _, err := fmt.Sscan(fs[4], &pid); err == nil {
				return pid
			}
		}
	}
	return 0
}

// HolderOf is what the holder of dataDir's writer lock recorded, or ""
// when the lock is free (a probe: it takes and drops the lock).
func HolderOf(dataDir string) string {
	p, err := LockPath(dataDir)
	if err != nil {
		return ""
	}
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return ""
	}
	defer f.Close()
	if err := unix.Flock(int(f.Fd()), unix.LOCK_SH|unix.LOCK_NB); err == nil {
		_ = unix.Flock(int(f.Fd()), unix.LOCK_UN)
		return ""
	}
	st, err := f.Stat()
	if err != nil {
		return "holder unknown"
	}
	return holderOf(f, st)
}

// Release removes the lock file and drops the lock. Safe on a nil lock
// and when called twice.
func (l *WriterLock) Release() error {
	if l == nil || l.f == nil {
		return nil
	}
	rerr := os.Remove(l.Path) // while still locked: see LockDataDir
	err := l.f.Close()        // closing the only descriptor releases the flock
	l.f = nil
	if err == nil && rerr != nil && !errors.Is(rerr, os.ErrNotExist) {
		err = rerr
	}
	return err
}
