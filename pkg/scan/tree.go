package scan

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/storectl/storectl/internal/storefile"
)

// Finding codes of the tree check, the same for every store kind.
const (
	// CodeSymlink is a symbolic link in the data dir. The brokers open
	// their files by path and read through a link, so the scanners do
	// too (a skipped segment used to move the recovery end); the writers
	// refuse such a data dir (a plan would change the bytes behind the
	// link, or replace the link by a copy).
	CodeSymlink = "storectl.file.symlink"
	// CodeNotRegular is a named pipe, socket or device in the data dir,
	// where a broker keeps only regular files and dirs: nothing reads it
	// (an open would block or act on a device) and the writers refuse.
	CodeNotRegular = "storectl.file.not-regular"
	// CodeUnreadable is a store file a scanner could not read (permission,
	// I/O error, a read cut short, or a dir, FIFO, socket or device under
	// a store file's name): what it holds is unknown, not lost, and the
	// run is incomplete (exit 3). Scanners with a code of their own for an
	// unreadable file (rabbitmq.rdq.unreadable, rabbitmq.queue.unreadable,
	// rabbitmq.quorum.unreadable) report that one instead.
	CodeUnreadable = "storectl.file.unreadable"
	// CodeStageLeftover is a staging file or dir a storectl writer left
	// when it was killed (inside the data dir: the file it was about to
	// rename over its target; beside it: a planner's stage dir).
	CodeStageLeftover = "storectl.stage.leftover"
)

// Unreadable is the CodeUnreadable finding for the store file at rel
// (relative to the data dir) that err kept from being read; a path that
// is not a regular file says what it is instead.
func Unreadable(rel string, err error) Finding {
	f := Finding{Code: CodeUnreadable, Severity: Error, Path: rel, Repair: RepairNone,
		Message: fmt.Sprintf("%s could not be read (%s); it was not checked, and what it holds is unknown, not lost", rel, errText(err))}
	var nr *storefile.NotRegularError
	if errors.As(err, &nr) {
		f.Expected, f.Actual = "regular file", strings.TrimPrefix(storefile.TypeName(nr.Mode), "a ")
		f.Message = fmt.Sprintf("%s is %s, not a regular file: it was not read, and what the store kept under its name is unknown, not lost", rel, storefile.TypeName(nr.Mode))
	}
	return f
}

// Unread records that the store file at rel could not be read: its
// Unreadable finding, and the result incomplete with err (prefixed by
// rel) in its errors.
func (r *Result) Unread(rel string, err error) {
	r.Add(Unreadable(rel, err))
	r.Fail(fmt.Errorf("%s: %w", rel, err))
}

// StagePrefix starts the name of the staging file a writer puts beside
// each file it changes (repair.StagePrefix; a test keeps them equal).
const StagePrefix = ".storectl-stage-"

// Odd is an entry of a data dir that is neither a regular file nor a
// directory.
type Odd struct {
	Path     string      // relative to the data dir, slash-separated
	Mode     fs.FileMode // type bits (lstat)
	Target   string      // a symlink's target as written (readlink)
	Resolved string      // a symlink resolved to an absolute path; "" when dangling
	Inside   bool        // the symlink resolves inside the data dir
	IsDir    bool        // the symlink resolves to a directory
	IsFile   bool        // the symlink resolves to a regular file
	Stage    bool        // a regular file named StagePrefix+name: a killed writer's staging file
}

// BlocksWriters reports whether a writer must refuse the data dir for o:
// every symlink that resolves to a file (the plan would act on the link's
// bytes, which may be another file of the store or lie outside it), every
// symlink leading out of the data dir, every dangling link, and every
// FIFO, socket and device. A symlinked dir inside the data dir is walked
// at its real place and does not block.
func (o Odd) BlocksWriters() bool {
	if o.Stage {
		return false // the next apply or undo replaces or removes it
	}
	if o.Mode&fs.ModeSymlink == 0 {
		return true
	}
	return !o.IsDir || !o.Inside
}

// Finding describes o.
func (o Odd) Finding() Finding {
	if o.Stage {
		return Finding{Code: CodeStageLeftover, Severity: Warning, Path: o.Path, Repair: RepairNone,
			Message: fmt.Sprintf("%s is a staging file a killed storectl apply or undo left beside the file it was changing; the broker may take it for a store file: run storectl undo on that apply's backup dir (it removes it), or remove it", o.Path)}
	}
	if o.Mode&fs.ModeSymlink == 0 {
		return Finding{Code: CodeNotRegular, Severity: Error, Path: o.Path, Repair: RepairNone,
			Expected: "regular file or directory", Actual: strings.TrimPrefix(storefile.TypeName(o.Mode), "a "),
			Message: fmt.Sprintf("%s is %s where the broker keeps regular files; it is not read (an open could block), and writers refuse this data dir",
				o.Path, storefile.TypeName(o.Mode))}
	}
	where := "outside the data dir"
	if o.Inside {
		where = "inside the data dir"
	}
	var what string
	switch {
	case o.Resolved == "":
		what = "a dangling symbolic link (its target does not exist)"
	case o.IsDir:
		what = "a symbolic link to a directory " + where
	case o.IsFile:
		what = "a symbolic link to a file " + where
	default:
		what = "a symbolic link to something that is not a regular file or directory"
	}
	msg := fmt.Sprintf("%s is %s (%s); the broker reads through it, and so does the scan", o.Path, what, o.Target)
	if o.BlocksWriters() {
		msg += "; writers refuse this data dir until the link is replaced by the file or dir"
	}
	return Finding{Code: CodeSymlink, Severity: Warning, Path: o.Path, Repair: RepairNone,
		Expected: "regular file or directory", Actual: "symlink to " + o.Target, Message: msg,
		Details: map[string]any{"target": o.Target, "resolved": o.Resolved, "inside_data_dir": o.Inside}}
}

// CheckTree lists the odd entries (symlinks, FIFOs, sockets, devices) of
// the tree under root, without following symlinks and without opening
// anything but directories. Directories it may not read are skipped: the
// scanners report what they cannot read.
func CheckTree(ctx context.Context, root string) ([]Odd, error) {
	realRoot, err := filepath.EvalSymlinks(root)
	if err != nil {
		return nil, err
	}
	var out []Odd
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == root {
				return err
			}
			if d != nil && d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if cerr := ctx.Err(); cerr != nil {
			return cerr
		}
		t := d.Type()
		if t.IsRegular() && strings.HasPrefix(d.Name(), StagePrefix) {
			out = append(out, Odd{Path: Rel(root, p), Stage: true})
			return nil
		}
		if t.IsDir() || t.IsRegular() || p == root {
			return nil
		}
		rel := Rel(root, p)
		o := Odd{Path: rel, Mode: t}
		if t&fs.ModeSymlink != 0 {
			o.Target, _ = os.Readlink(p)
			if real, err := filepath.EvalSymlinks(p); err == nil {
				o.Resolved = real
				o.Inside = real == realRoot || strings.HasPrefix(real, strings.TrimSuffix(realRoot, "/")+"/")
				if st, err := os.Stat(real); err == nil {
					o.IsDir, o.IsFile = st.IsDir(), st.Mode().IsRegular()
				}
			}
		}
		out = append(out, o)
		return nil
	})
	return out, err
}

// OddFile is CheckTree for one file given on the command line (a
// single-file scan): the odd entry it is, if any.
func OddFile(root, path string) (Odd, bool) {
	st, err := os.Lstat(path)
	if err != nil || st.Mode().IsRegular() || st.IsDir() {
		return Odd{}, false
	}
	o := Odd{Path: Rel(root, path), Mode: st.Mode().Type()}
	if st.Mode()&fs.ModeSymlink != 0 {
		o.Target, _ = os.Readlink(path)
		if real, err := filepath.EvalSymlinks(path); err == nil {
			o.Resolved = real
			if rr, err := filepath.EvalSymlinks(root); err == nil {
				o.Inside = strings.HasPrefix(real, strings.TrimSuffix(rr, "/")+"/")
			}
			if st, err := os.Stat(real); err == nil {
				o.IsDir, o.IsFile = st.IsDir(), st.Mode().IsRegular()
			}
		}
	}
	return o, true
}
