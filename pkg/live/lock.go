package live

import (
	"errors"
	"io"
	"os"

	"golang.org/x/sys/unix"

	"github.com/storectl/storectl/internal/storefile"
)

// LockHeld reports whether another process holds a POSIX record lock on
// path that conflicts with a write lock over the whole file: the lock Java's
// FileChannel.lock/tryLock takes (RocketMQ locks byte 0 of <store>/lock). It
// only asks the kernel (F_OFD_GETLK, or F_GETLK on kernels without OFD
// locks): it never acquires a lock and never blocks. flock(2) locks are not
// seen, and neither are locks held by this process itself.
//
// pid is the holder's pid. An OFD lock has no owning process (the kernel
// reports -1); pid is then looked up among the processes that have the file
// open, and is 0 when that is unknown or ambiguous.
func LockHeld(path string) (held bool, pid int, err error) {
	// O_RDONLY is enough to ask; this process holds no lock on the file, so
	// closing it releases nothing.
	f, err := storefile.Open(path)
	if err != nil {
		return false, 0, err
	}
	defer f.Close()
	lk := wholeFileWriteLock()
	err = unix.FcntlFlock(f.Fd(), unix.F_OFD_GETLK, &lk)
	if errors.Is(err, unix.EINVAL) { // kernel before 3.15: no OFD locks
		lk = wholeFileWriteLock()
		err = unix.FcntlFlock(f.Fd(), unix.F_GETLK, &lk)
	}
	if err != nil {
		return false, 0, &os.PathError{Op: "fcntl getlk", Path: path, Err: err}
	}
	if lk.Type == unix.F_UNLCK {
		return false, 0, nil
	}
	pid = int(lk.Pid)
	if pid <= 0 {
		pid = soleHolder(path)
	}
	return true, pid, nil
}

// wholeFileWriteLock describes a write lock from byte 0 to the end of the
// file and beyond (Len 0); Pid must be 0 for the OFD commands.
func wholeFileWriteLock() unix.Flock_t {
	return unix.Flock_t{Type: unix.F_WRLCK, Whence: io.SeekStart, Start: 0, Len: 0}
}

// soleHolder returns the pid of the only other process with path open, or 0.
func soleHolder(path string) int {
	real, err := realPath(path)
	if err != nil {
		return 0
	}
	hs, _, err := scanProc(procRoot, func(p string) bool { return p == real })
	if err != nil {
		return 0
	}
	pid := 0
	for _, h := range hs {
		if pid != 0 && h.PID != pid {
			return 0
		}
		pid = h.PID
	}
	return pid
}
