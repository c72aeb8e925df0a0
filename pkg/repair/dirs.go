package repair

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"

	"github.com/storectl/storectl/internal/storefile"
)

// dirModeMask is the part of a directory's mode that Apply and Undo keep:
// permissions plus setgid (group inheritance of new files) and sticky.
const dirModeMask = fs.ModePerm | fs.ModeSetgid | fs.ModeSticky

// Directory changes recorded in a Manifest.
const (
	// DirCreated is a missing parent of a replace-file that Apply created.
	DirCreated = "created"
	// DirRemoved is an empty directory that a remove-dir action removed.
	DirRemoved = "removed"
)

// DirRecord is one directory an Apply creates or removes, with the mode and
// owner it gets (created: those of its nearest existing parent) or had
// (removed), so that rollback and Undo can put it back.
type DirRecord struct {
	Path   string `json:"path"`   // relative to the data dir
	Change string `json:"change"` // DirCreated or DirRemoved
	Mode   uint32 `json:"mode"`   // os.FileMode permission, setgid and sticky bits
	UID    int    `json:"uid"`
	GID    int    `json:"gid"`
}

// ancestors lists the parent dirs of the clean relative path rel,
// outermost first ("a/b/c" gives a, a/b).
func ancestors(rel string) []string {
	var out []string
	for d := filepath.Dir(rel); d != "." && d != string(filepath.Separator); d = filepath.Dir(d) {
		out = append(out, d)
	}
	slices.Reverse(out)
	return out
}

// cleanRel reports whether rel is a clean relative path inside the data dir
// other than the data dir itself.
func cleanRel(rel string) bool {
	return rel != "" && rel != "." && filepath.IsLocal(rel) && filepath.Clean(rel) == rel
}

// resolveParents joins root and rel after checking every existing parent
// dir of rel: it must be a directory and, symlinks resolved, lie inside
// root. It returns the parent dirs that do not exist (relative, outermost
// first): below the first missing one nothing can exist.
func resolveParents(root, rel string) (abs string, absent []string, err error) {
	return newResolver(root).parents(rel)
}

// resolver resolves the paths of one data dir: the root's real path is
// found once, and each parent dir once found to be a dir inside the root
// is not looked at again (Plan.Add over 100,000 files of one dir checks
// that dir once). Use one for a sequence of lookups over a tree nobody
// changes meanwhile (building a plan).
type resolver struct {
	root     string
	realRoot string
	dirOK    map[string]bool
}

func newResolver(root string) *resolver { return &resolver{root: root} }

// parents is resolveParents.
func (r *resolver) parents(rel string) (abs string, absent []string, err error) {
	root := r.root
	if !cleanRel(rel) {
		return "", nil, fmt.Errorf("%w: path %q is not a clean path inside the data dir", ErrInvalidPlan, rel)
	}
	if r.realRoot == "" {
		if r.realRoot, err = filepath.EvalSymlinks(root); err != nil {
			return "", nil, err
		}
	}
	realRoot := r.realRoot
	dirs := ancestors(rel)
	for i, d := range dirs {
		if r.dirOK[d] {
			continue
		}
		p := filepath.Join(root, d)
		fi, err := os.Lstat(p)
		if errors.Is(err, fs.ErrNotExist) {
			return filepath.Join(root, rel), dirs[i:], nil
		}
		if err != nil {
			return "", nil, err
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			real, err := filepath.EvalSymlinks(p)
			if err != nil || !within(realRoot, real) {
				return "", nil, fmt.Errorf("%w: %s: parent %s resolves outside the data dir", ErrInvalidPlan, rel, d)
			}
			if fi, err = os.Stat(real); err != nil {
				return "", nil, err
			}
		}
		if !fi.IsDir() {
			return "", nil, fmt.Errorf("%w: %s: parent %s is not a directory", ErrInvalidPlan, rel, d)
		}
		if r.dirOK == nil {
			r.dirOK = map[string]bool{}
		}
		r.dirOK[d] = true
	}
	return filepath.Join(root, rel), nil, nil
}

// snapshotDir is the precondition of a remove-dir: Exists when root/rel is
// a directory (not a symlink to one) inside root.
func snapshotDir(res *resolver, rel string) (FileState, error) {
	abs, absent, err := res.parents(rel)
	if err != nil || len(absent) > 0 {
		return FileState{}, err
	}
	fi, err := os.Lstat(abs)
	if errors.Is(err, fs.ErrNotExist) {
		return FileState{}, nil
	}
	if err != nil {
		return FileState{}, err
	}
	if !fi.IsDir() {
		return FileState{}, fmt.Errorf("%w: %s is not a directory (%s)", ErrInvalidPlan, rel, fi.Mode().Type())
	}
	return FileState{Exists: true}, nil
}

// checkDir re-checks a remove-dir precondition before anything is
// written: the dir still exists and holds nothing but what the plan
// removes (the paths in removed).
func checkDir(res *resolver, rel string, removed map[string]bool) error {
	abs, absent, err := res.parents(rel)
	if err != nil {
		return err
	}
	fi, err := os.Lstat(abs)
	if len(absent) > 0 || errors.Is(err, fs.ErrNotExist) {
		return &StaleError{Path: rel, What: "existence", Expected: "present", Actual: "absent"}
	}
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return &StaleError{Path: rel, What: "type", Expected: "directory", Actual: fi.Mode().Type().String()}
	}
	ents, err := storefile.ReadDir(abs)
	if err != nil {
		return err
	}
	for _, e := range ents {
		if p := filepath.Join(rel, e.Name()); !removed[p] {
			return &StaleError{Path: rel, What: "entries", Expected: "only entries the plan removes", Actual: p}
		}
	}
	return nil
}

// validateDirs checks how the actions' paths nest: no path lies below a
// file another action changes; inside a removed dir only removals; every
// action below a dir that some replace-file records as absent records it
// absent too (so they cannot disagree about the tree), and no action
// targets such a dir itself.
func validateDirs(acts []Action) error {
	op := map[string]*Action{}
	absent := map[string]bool{}
	for i := range acts {
		a := &acts[i]
		op[a.Path] = a
		for _, d := range a.Pre.AbsentDirs {
			absent[d] = true
		}
	}
	for i := range acts {
		a := &acts[i]
		if absent[a.Path] {
			return fmt.Errorf("action %s: %s is a dir the plan creates", a.ID, a.Path)
		}
		for _, d := range ancestors(a.Path) {
			if b := op[d]; b != nil && b.Op != OpRemoveDir {
				return fmt.Errorf("action %s: %s is below %s, which action %s changes as a file", a.ID, a.Path, d, b.ID)
			}
			if b := op[d]; b != nil && a.Op != OpRemoveFile && a.Op != OpRemoveDir {
				return fmt.Errorf("action %s (%s) is inside %s, which action %s removes", a.ID, a.Op, d, b.ID)
			}
			if absent[d] && !slices.Contains(a.Pre.AbsentDirs, d) {
				return fmt.Errorf("action %s: parent %s is absent for another action but not for this one", a.ID, d)
			}
		}
	}
	return nil
}

// validateAbsentDirs checks one action's AbsentDirs: only a replace-file
// of an absent file has them, and they are its innermost parent dirs,
// outermost first.
func (a *Action) validateAbsentDirs() error {
	ad := a.Pre.AbsentDirs
	if len(ad) == 0 {
		return nil
	}
	if a.Op != OpReplaceFile || a.Pre.Exists {
		return fmt.Errorf("absent_dirs only belong to a replace-file that creates its file")
	}
	anc := ancestors(a.Path)
	if len(ad) > len(anc) || !slices.Equal(ad, anc[len(anc)-len(ad):]) {
		return fmt.Errorf("absent_dirs %q are not the innermost parents of the path, outermost first", ad)
	}
	return nil
}

// planDirs returns the dirs Apply creates (parents first) and removes
// (deepest first), each sorted by depth, then path.
func planDirs(p *Plan) (create, remove []string) {
	seen := map[string]bool{}
	for _, a := range p.Actions {
		for _, d := range a.Pre.AbsentDirs {
			if !seen[d] {
				seen[d] = true
				create = append(create, d)
			}
		}
		if a.Op == OpRemoveDir {
			remove = append(remove, a.Path)
		}
	}
	depth := func(p string) int { return strings.Count(p, string(filepath.Separator)) }
	sort.Slice(create, func(i, j int) bool {
		di, dj := depth(create[i]), depth(create[j])
		return di < dj || di == dj && create[i] < create[j]
	})
	sort.Slice(remove, func(i, j int) bool {
		di, dj := depth(remove[i]), depth(remove[j])
		return di > dj || di == dj && remove[i] < remove[j]
	})
	return create, remove
}

// recordDirs stats the dirs of the plan for the manifest: a dir to create
// must still be absent (else ErrStale) and takes the mode and owner of its
// nearest existing parent; a dir to remove keeps its own.
func recordDirs(root string, p *Plan) ([]DirRecord, error) {
	create, remove := planDirs(p)
	var out []DirRecord
	for _, d := range create {
		if _, err := os.Lstat(filepath.Join(root, d)); !errors.Is(err, fs.ErrNotExist) {
			return nil, &StaleError{Path: d, What: "existence", Expected: "absent", Actual: "present"}
		}
		parent := filepath.Dir(d)
		for ; parent != "."; parent = filepath.Dir(parent) {
			if _, err := os.Lstat(filepath.Join(root, parent)); err == nil {
				break
			}
		}
		rec, err := statDir(filepath.Join(root, parent), os.Stat)
		if err != nil {
			return nil, err
		}
		rec.Path, rec.Change = d, DirCreated
		out = append(out, rec)
	}
	for _, d := range remove {
		rec, err := statDir(filepath.Join(root, d), os.Lstat)
		if err != nil {
			return nil, err
		}
		rec.Path, rec.Change = d, DirRemoved
		out = append(out, rec)
	}
	return out, nil
}

// statDir reads the kept mode bits and owner of a directory.
func statDir(path string, stat func(string) (fs.FileInfo, error)) (DirRecord, error) {
	fi, err := stat(path)
	if err != nil {
		return DirRecord{}, err
	}
	if !fi.IsDir() {
		return DirRecord{}, &StaleError{Path: path, What: "type", Expected: "directory", Actual: fi.Mode().Type().String()}
	}
	rec := DirRecord{Mode: uint32(fi.Mode() & dirModeMask)}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		rec.UID, rec.GID = int(st.Uid), int(st.Gid)
	}
	return rec, nil
}

// dirsOf returns the manifest's dir records with the given change, in
// manifest order (created: parents first; removed: deepest first).
func dirsOf(m *Manifest, change string) []*DirRecord {
	var out []*DirRecord
	for i := range m.Dirs {
		if m.Dirs[i].Change == change {
			out = append(out, &m.Dirs[i])
		}
	}
	return out
}

// makeDir creates root/rec.Path with rec's mode and owner and fsyncs its
// parent, each a counted step; an existing dir only gets its mode and
// owner fixed. made is true once this call created the dir.
func makeDir(w *fsw, root string, rec *DirRecord) (made bool, err error) {
	dir := filepath.Join(root, rec.Path)
	want := fs.FileMode(rec.Mode)
	if _, err := os.Lstat(dir); errors.Is(err, fs.ErrNotExist) {
		if err := w.step("mkdir " + dir); err != nil {
			return false, err
		}
		if err := os.Mkdir(dir, want.Perm()); err != nil {
			return false, err
		}
		made = true
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return made, err
	}
	if !fi.IsDir() {
		return made, fmt.Errorf("%s exists and is not a directory", dir)
	}
	if fi.Mode()&dirModeMask != want { // umask, or a mode a crash left half-set
		if err := w.step("chmod " + dir); err != nil {
			return made, err
		}
		if err := os.Chmod(dir, want); err != nil {
			return made, err
		}
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && (int(st.Uid) != rec.UID || int(st.Gid) != rec.GID) {
		if err := w.step("chown " + dir); err != nil {
			return made, err
		}
		if err := os.Lchown(dir, rec.UID, rec.GID); err != nil {
			return made, fmt.Errorf("keeping the owner of %s: %w", dir, err)
		}
	}
	return made, w.syncDir(filepath.Dir(dir))
}

// removeDir removes the empty dir root/rel (rmdir never removes a file or
// a non-empty dir) and fsyncs its parent, each a counted step. removed is
// true once the dir is gone; a dir already absent is not an error.
func removeDir(w *fsw, root, rel string) (removed bool, err error) {
	dir := filepath.Join(root, rel)
	if err := w.step("rmdir " + dir); err != nil {
		return false, err
	}
	if err := syscall.Rmdir(dir); err != nil && !errors.Is(err, fs.ErrNotExist) {
		if errors.Is(err, syscall.ENOTEMPTY) || errors.Is(err, syscall.EEXIST) {
			return false, fmt.Errorf("removing %s: the directory is not empty", rel)
		}
		return false, &fs.PathError{Op: "rmdir", Path: dir, Err: err}
	}
	return true, w.syncDir(filepath.Dir(dir))
}
