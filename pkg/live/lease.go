package live

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/storectl/storectl/internal/storefile"
)

// initPidNSInode is the inode number of the initial PID namespace
// (PROC_PID_INIT_INO in the kernel's include/linux/proc_ns.h, fixed since
// Linux 3.8): /proc/self/ns/pid links to pid:[4026531836] there and to
// another number in any other (a container, `unshare -p`).
const initPidNSInode = 0xEFFFFFFC

// procSeesAll reports whether the /proc scan can see every process that
// might have the data dir open, and why not: it must run as root (other
// users' fd dirs are unreadable, and hidepid may hide their processes
// altogether) in the initial PID namespace (processes outside this one
// have no /proc entry here, and a pid file naming one looks dead).
func procSeesAll() (bool, string) {
	var why []string
	if os.Geteuid() != 0 {
		why = append(why, "not running as root: the open files of other users' processes are not visible in /proc")
	}
	if ns, err := os.Readlink("/proc/self/ns/pid"); err != nil || ns != fmt.Sprintf("pid:[%d]", initPidNSInode) {
		why = append(why, "running in a PID namespace other than the host's: processes outside it are not visible in /proc")
	}
	return len(why) == 0, strings.Join(why, "; ")
}

// leaseResult is what probing the files of a dir with leases found.
type leaseResult struct {
	open     []string // files another process has open or mapped
	unprobed int      // files the probe could not decide (not the owner, no lease support)
	example  string   // one unprobed file and why
	files    int
}

// leaseProbe asks the kernel, for every regular file under root (no
// symlink followed), whether any other open file description exists for
// it, whoever holds it and in whatever PID namespace: a write lease
// (F_SETLEASE F_WRLCK) is granted only when none does, and fails with
// EAGAIN otherwise (a mapping counts: it holds the file open). It never
// blocks: the lease is released as soon as it is granted. Taking a lease
// needs the file's owner or CAP_LEASE, and a file system that supports
// leases; other files are counted unprobed.
func leaseProbe(root string) (leaseResult, error) {
	var r leaseResult
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == root {
				return err
			}
			r.unprobed++
			if r.example == "" {
				r.example = p + ": " + err.Error()
			}
			if d != nil && d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() {
			return nil
		}
		r.files++
		switch open, err := leaseOpen(p); {
		case err != nil:
			r.unprobed++
			if r.example == "" {
				r.example = p + ": " + err.Error()
			}
		case open:
			r.open = append(r.open, p)
		}
		return nil
	})
	return r, err
}

// leaseOpen reports whether another open file description of path exists.
func leaseOpen(path string) (bool, error) {
	f, err := storefile.OpenNoFollow(path)
	if err != nil {
		return false, err
	}
	defer f.Close()
	_, err = unix.FcntlInt(f.Fd(), unix.F_SETLEASE, unix.F_WRLCK)
	if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EBUSY) {
		return true, nil
	}
	if err != nil {
		return false, &os.PathError{Op: "fcntl setlease", Path: path, Err: err}
	}
	_, err = unix.FcntlInt(f.Fd(), unix.F_SETLEASE, unix.F_UNLCK)
	return false, err
}
