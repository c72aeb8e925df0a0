package repair

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// ErrApplyFailed is wrapped when Apply failed after it started writing (the
// backup or the data dir); the ApplyReport says what was rolled back.
var ErrApplyFailed = errors.New("apply failed")

// ErrLimit is wrapped when a plan exceeds an ApplyOptions limit; nothing has
// been written.
var ErrLimit = errors.New("plan exceeds a limit")

// ErrInjected is the error a Faults hook returns.
var ErrInjected = errors.New("injected fault")

// Injector decides, before each counted write step of Apply or Undo (see
// Faults.FailAtWrite for what counts), whether it fails: a test's way to
// fail (or kill the process at) any step. step counts from 1; what names
// the step ("write <file>", "rename <file>", ...). A nil Injector injects
// nothing. FailAt, DiskFullAt and the test binaries' kill hooks implement
// it.
type Injector interface {
	Inject(step int, what string) error
}

// FailAt fails the step with that number with ErrInjected.
type FailAt int

// Inject implements Injector.
func (n FailAt) Inject(step int, what string) error {
	if step == int(n) {
		return fmt.Errorf("%w at write step %d (%s)", ErrInjected, step, what)
	}
	return nil
}

// DiskFullAt makes every step that allocates space (a write, a mkdir)
// from the step with that number on fail as a full file system does
// (ENOSPC), rollback included: renames, unlinks, truncates and fsyncs
// still work.
type DiskFullAt int

// Inject implements Injector.
func (n DiskFullAt) Inject(step int, what string) error {
	if step >= int(n) && (strings.HasPrefix(what, "write ") || strings.HasPrefix(what, "mkdir ")) {
		return &os.PathError{Op: what, Path: "", Err: syscall.ENOSPC}
	}
	return nil
}

// Faults injects failures into Apply and Undo for tests. The CLI never sets
// it; the zero value injects nothing.
type Faults struct {
	// Injector, when set, is asked before every counted step (after
	// FailAtWrite). Unlike FailAtWrite it is also asked during the
	// rollback of a failed Apply (steps go on counting), so a disk that
	// fills up stays full while the rollback runs.
	Injector Injector

	// FailAtWrite, when > 0, makes the Nth counted write step fail with
	// ErrInjected. Counted steps are every write, truncate, fsync (file or
	// directory), rename, chown/chmod/chtimes, mkdir, rmdir and unlink made
	// by Apply (backup and data dir) or by an applying Undo;
	// ApplyReport.Steps says how many a successful run took. Rollback is
	// never faulted.
	FailAtWrite int

	// skipSync counts fsync steps without making the syscall: the
	// fault-at-every-step tests would otherwise spend minutes in fsync.
	skipSync bool
	// noRollback makes a failed Apply stop dead, as if the process had been
	// killed: no rollback, no backup cleanup (tests of crash recovery).
	noRollback bool
	// onStep, when set, runs before each counted step with its
	// description (tests that change the tree mid-apply).
	onStep func(what string)
}

// fsw performs the counted write steps. Every mutation of the backup or the
// data dir goes through it, so fault injection covers them all.
type fsw struct {
	faults Faults
	n      int
}

// step counts one write step and returns the injected fault, if any.
func (w *fsw) step(what string) error {
	w.n++
	if w.faults.onStep != nil {
		w.faults.onStep(what)
	}
	if w.faults.FailAtWrite > 0 && w.n == w.faults.FailAtWrite {
		return fmt.Errorf("%w at write step %d (%s)", ErrInjected, w.n, what)
	}
	if w.faults.Injector != nil {
		return w.faults.Injector.Inject(w.n, what)
	}
	return nil
}

func (w *fsw) writeAt(f *os.File, b []byte, off int64) error {
	if err := w.step("write " + f.Name()); err != nil {
		return err
	}
	_, err := f.WriteAt(b, off)
	return err
}

// overwriteAt writes over bytes the file already has (the rollback's
// in-place restore): a step of its own, which allocates nothing.
func (w *fsw) overwriteAt(f *os.File, b []byte, off int64) error {
	if err := w.step("overwrite " + f.Name()); err != nil {
		return err
	}
	_, err := f.WriteAt(b, off)
	return err
}

func (w *fsw) truncate(f *os.File, size int64) error {
	if err := w.step("truncate " + f.Name()); err != nil {
		return err
	}
	return f.Truncate(size)
}

func (w *fsw) sync(f *os.File) error {
	if err := w.step("fsync " + f.Name()); err != nil || w.faults.skipSync {
		return err
	}
	return f.Sync()
}

func (w *fsw) rename(from, to string) error {
	if err := w.step("rename " + to); err != nil {
		return err
	}
	return os.Rename(from, to)
}

func (w *fsw) remove(path string) error {
	if err := w.step("unlink " + path); err != nil {
		return err
	}
	return os.Remove(path)
}

// syncDir fsyncs a directory so renames, creates and unlinks in it are durable.
func (w *fsw) syncDir(dir string) error {
	if err := w.step("fsync dir " + dir); err != nil || w.faults.skipSync {
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// mkdir creates dir (mode 0700: backups hold message data) and fsyncs its parent.
func (w *fsw) mkdir(dir string) error {
	if err := w.step("mkdir " + dir); err != nil {
		return err
	}
	if err := os.Mkdir(dir, 0o700); err != nil {
		return err
	}
	return w.syncDir(filepath.Dir(dir))
}

// writeFile creates path (O_EXCL) with b, fsyncs it and its directory.
func (w *fsw) writeFile(path string, b []byte) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	err = w.writeAt(f, b, 0)
	if err == nil {
		err = w.sync(f)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = w.syncDir(filepath.Dir(path))
	}
	return err
}
