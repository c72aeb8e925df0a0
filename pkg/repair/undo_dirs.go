package repair

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/storectl/storectl/internal/storefile"
)

// classifyDirs fills rep.Dirs: a created dir that still exists is removed
// when it holds only what Undo removes (created files and dirs, leftover
// stages), else kept and reported stale; a removed dir that is missing or
// lost its mode or owner is recreated. It returns the first stale dir as a
// *StaleError, and fails outright when a file now sits where a removed dir
// was (no file can be restored into it).
func classifyDirs(root string, m *Manifest, rep *UndoReport) (stale error, err error) {
	gone := map[string]bool{} // paths Undo removes
	for _, uf := range rep.Files {
		if uf.Action == UndoRemove {
			gone[uf.Path] = true
		}
	}
	for _, st := range rep.Stages {
		gone[st] = true
	}
	rep.Dirs = make([]UndoDir, len(m.Dirs))
	for i := len(m.Dirs) - 1; i >= 0; i-- { // created dirs deepest first: a child's verdict is known before its parent's
		d := &m.Dirs[i]
		ud := UndoDir{Path: d.Path, Action: UndoNothing}
		if _, _, err := resolveParents(root, d.Path); err != nil {
			return nil, err
		}
		fi, err := os.Lstat(filepath.Join(root, d.Path))
		switch {
		case errors.Is(err, fs.ErrNotExist):
			if d.Change == DirRemoved {
				ud.Action = UndoCreateDir
			}
		case err != nil:
			return nil, err
		case d.Change == DirRemoved && !fi.IsDir():
			return nil, &StaleError{Path: d.Path, What: "type", Expected: "directory or absent", Actual: fi.Mode().Type().String()}
		case d.Change == DirRemoved:
			if st, ok := fi.Sys().(*syscall.Stat_t); fi.Mode()&dirModeMask != fs.FileMode(d.Mode) || ok && (int(st.Uid) != d.UID || int(st.Gid) != d.GID) {
				ud.Action = UndoCreateDir
			}
		default:
			ud.Action = UndoRemoveDir
			extra, err := foreignEntry(root, d.Path, fi, gone)
			if err != nil {
				return nil, err
			}
			if extra != "" {
				ud.Action, ud.Stale = UndoKeepDir, true
				if stale == nil {
					stale = &StaleError{Path: d.Path, What: "entries since the apply", Expected: "only entries the apply created", Actual: extra}
				}
			} else {
				gone[d.Path] = true
			}
		}
		rep.Dirs[i] = ud
	}
	return stale, nil
}

// foreignEntry returns an entry of the created dir rel that Undo would
// not remove ("" if none), or rel itself when it is not a directory.
func foreignEntry(root, rel string, fi fs.FileInfo, gone map[string]bool) (string, error) {
	if !fi.IsDir() {
		return rel, nil
	}
	ents, err := storefile.ReadDir(filepath.Join(root, rel))
	if err != nil {
		return "", err
	}
	for _, e := range ents {
		if p := filepath.Join(rel, e.Name()); !gone[p] {
			return p, nil
		}
	}
	return "", nil
}

// undoDirs performs the dir verdicts with the given action in reverse
// manifest order: removed dirs (stored deepest first) are recreated parents
// first, created dirs (stored parents first) are removed deepest first.
func undoDirs(ctx context.Context, w *fsw, root string, m *Manifest, rep *UndoReport, action string) error {
	for i := len(m.Dirs) - 1; i >= 0; i-- {
		ud := &rep.Dirs[i]
		if ud.Action != action {
			continue
		}
		err := ctx.Err()
		if err == nil && action == UndoCreateDir {
			_, err = makeDir(w, root, &m.Dirs[i])
		} else if err == nil {
			_, err = removeDir(w, root, ud.Path)
		}
		if err != nil {
			return fmt.Errorf("%w: undo stopped at dir %s: %w (what was restored so far stays restored; run undo again)", ErrApplyFailed, ud.Path, err)
		}
		ud.Done = true
	}
	return nil
}
