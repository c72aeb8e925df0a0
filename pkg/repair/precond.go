package repair

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/storectl/storectl/internal/storefile"
)

// ErrStale is wrapped when a file no longer matches the precondition
// recorded in a plan (or, for Undo, the state an Apply left).
var ErrStale = errors.New("file changed since the plan was made")

// StaleError says which file moved and how. It wraps ErrStale.
type StaleError struct {
	Path     string // relative to the data dir
	What     string // "size", "mtime", "sha256", "range 100+20 sha256", "existence", ...
	Expected string
	Actual   string
}

// Error names the file, what moved, and both values.
func (e *StaleError) Error() string {
	return fmt.Sprintf("%v: %s: %s is %s, plan expected %s", ErrStale, e.Path, e.What, e.Actual, e.Expected)
}

// Unwrap makes errors.Is(err, ErrStale) true.
func (e *StaleError) Unwrap() error { return ErrStale }

// RangeHash pins one byte range of a file by its SHA-256 (hex).
type RangeHash struct {
	Offset int64  `json:"offset"`
	Length int64  `json:"length"`
	SHA256 string `json:"sha256"`
}

// FileState is the precondition of an action: what its file looked like at
// plan time. SHA256 (whole file) is optional; Ranges are mandatory for every
// range the action changes, so huge files can be checked cheaply.
// AbsentDirs are the parent dirs of an absent file that did not exist
// either (relative, outermost first): a replace-file creates them, and
// they must still be absent when the plan is applied. For a remove-dir,
// Exists says the directory exists and nothing else is set.
type FileState struct {
	Exists     bool        `json:"exists"`
	Size       int64       `json:"size"`
	MtimeNs    int64       `json:"mtime_ns"`
	SHA256     string      `json:"sha256,omitempty"`
	Ranges     []RangeHash `json:"ranges,omitempty"`
	AbsentDirs []string    `json:"absent_dirs,omitempty"`
}

// SnapshotOptions tune Snapshot.
type SnapshotOptions struct {
	// SkipWholeFile leaves FileState.SHA256 empty: only size, mtime and the
	// range hashes are recorded and checked (cheap on 1 GiB commitlogs).
	SkipWholeFile bool
}

// Snapshot records size, mtime, the whole-file SHA-256 and the SHA-256 of
// each range of root/rel. A missing file gives Exists=false and no error,
// with its missing parent dirs in AbsentDirs.
func Snapshot(root, rel string, ranges ...Range) (FileState, error) {
	return SnapshotWith(root, rel, SnapshotOptions{}, ranges...)
}

// SnapshotWith is Snapshot with options.
func SnapshotWith(root, rel string, o SnapshotOptions, ranges ...Range) (FileState, error) {
	return snapshot(newResolver(root), rel, o, func(int64) []Range { return ranges })
}

// snapshot is SnapshotWith through a resolver, with the ranges to hash
// chosen once the size is known (Plan.Add: the range an action changes
// depends on the file's size), from one open of the file.
func snapshot(res *resolver, rel string, o SnapshotOptions, rangesFor func(size int64) []Range) (FileState, error) {
	var st FileState
	abs, absent, err := res.parents(rel)
	if err != nil {
		return st, err
	}
	if len(absent) > 0 {
		return FileState{AbsentDirs: absent}, nil
	}
	f, err := storefile.OpenNoFollow(abs)
	if errors.Is(err, fs.ErrNotExist) {
		return st, nil
	}
	if errors.Is(err, storefile.ErrNotRegular) {
		return st, fmt.Errorf("%w: %s is not a regular file: %v", ErrInvalidPlan, rel, err)
	}
	if err != nil {
		return st, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return st, err
	}
	st = FileState{Exists: true, Size: fi.Size(), MtimeNs: fi.ModTime().UnixNano()}
	ranges := rangesFor(st.Size)
	if !o.SkipWholeFile {
		if st.SHA256, err = hashRange(f, Range{0, st.Size}); err != nil {
			return st, err
		}
	}
	for _, r := range ranges {
		if r.Offset < 0 || r.Length < 0 || r.End() > st.Size || r.End() < r.Offset {
			return st, fmt.Errorf("%w: %s: range %d+%d outside file of %d bytes", ErrInvalidPlan, rel, r.Offset, r.Length, st.Size)
		}
		sum := st.SHA256 // a range of the whole file (remove-file, replace-file) is hashed once
		if sum == "" || r != (Range{0, st.Size}) {
			if sum, err = hashRange(f, r); err != nil {
				return st, err
			}
		}
		st.Ranges = append(st.Ranges, RangeHash{r.Offset, r.Length, sum})
	}
	return st, nil
}

// Check re-checks every precondition of the plan against the files under
// root (normally p.DataDir) and the staged sources: each file as recorded,
// each parent dir recorded absent still absent, each dir to remove present
// and holding nothing but what the plan removes. It returns the first
// mismatch as a *StaleError (wrapping ErrStale); it never writes.
func (p *Plan) Check(root string) error {
	removed := map[string]bool{}
	for _, a := range p.Actions {
		if a.Op == OpRemoveFile || a.Op == OpRemoveDir {
			removed[a.Path] = true
		}
	}
	wholeDone := map[string]bool{}
	res := newResolver(root)
	for i := range p.Actions {
		a := &p.Actions[i]
		if a.Op == OpRemoveDir {
			if err := checkDir(res, a.Path, removed); err != nil {
				return err
			}
			continue
		}
		skipWhole := wholeDone[a.Path]
		if err := checkState(res, a.Path, a.Pre, skipWhole); err != nil {
			return err
		}
		wholeDone[a.Path] = true
		if a.Source != "" {
			_, sum, err := hashWhole(a.Source)
			if err != nil {
				return fmt.Errorf("action %s: staged source: %w", a.ID, err)
			}
			if sum != a.SourceSHA256 {
				return &StaleError{Path: a.Source, What: "staged source sha256", Expected: a.SourceSHA256, Actual: sum}
			}
		}
	}
	return nil
}

// checkState compares root/rel with want; skipWhole skips the whole-file
// hash (already checked for an earlier action on the same file).
func checkState(res *resolver, rel string, want FileState, skipWhole bool) error {
	if skipWhole {
		want.SHA256 = ""
	}
	got, err := snapshot(res, rel, SnapshotOptions{SkipWholeFile: want.SHA256 == ""}, func(int64) []Range { return nil })
	if err != nil {
		return err
	}
	switch {
	case got.Exists != want.Exists:
		return &StaleError{Path: rel, What: "existence", Expected: existWord(want.Exists), Actual: existWord(got.Exists)}
	case !want.Exists && !slices.Equal(got.AbsentDirs, want.AbsentDirs):
		return &StaleError{Path: rel, What: "absent parent dirs", Expected: dirList(want.AbsentDirs), Actual: dirList(got.AbsentDirs)}
	case !want.Exists:
		return nil
	case got.Size != want.Size:
		return &StaleError{Path: rel, What: "size", Expected: fmt.Sprint(want.Size), Actual: fmt.Sprint(got.Size)}
	case got.MtimeNs != want.MtimeNs:
		return &StaleError{Path: rel, What: "mtime_ns", Expected: fmt.Sprint(want.MtimeNs), Actual: fmt.Sprint(got.MtimeNs)}
	case want.SHA256 != "" && got.SHA256 != want.SHA256:
		return &StaleError{Path: rel, What: "sha256", Expected: want.SHA256, Actual: got.SHA256}
	case len(want.Ranges) == 0:
		return nil
	}
	got, err = snapshot(res, rel, SnapshotOptions{SkipWholeFile: true}, func(int64) []Range { return rangesOf(want) })
	if errors.Is(err, ErrInvalidPlan) {
		return &StaleError{Path: rel, What: "size", Expected: fmt.Sprint(want.Size), Actual: "changed during the check"}
	}
	if err != nil {
		return err
	}
	for i, r := range want.Ranges {
		if got.Ranges[i].SHA256 != r.SHA256 {
			return &StaleError{Path: rel, What: fmt.Sprintf("range %d+%d sha256", r.Offset, r.Length), Expected: r.SHA256, Actual: got.Ranges[i].SHA256}
		}
	}
	return nil
}

func rangesOf(st FileState) []Range {
	rs := make([]Range, len(st.Ranges))
	for i, r := range st.Ranges {
		rs[i] = Range{r.Offset, r.Length}
	}
	return rs
}

func dirList(dirs []string) string {
	if len(dirs) == 0 {
		return "none"
	}
	return strings.Join(dirs, ", ")
}

func existWord(b bool) string {
	if b {
		return "present"
	}
	return "absent"
}

// resolve joins root and rel, refusing paths that leave root (.., absolute,
// or a symlinked parent pointing elsewhere) and targets that exist but are
// not regular files (a rename over a symlink would replace the link).
// Parent dirs may be missing (the file is then missing too).
func resolve(root, rel string) (string, error) {
	abs, _, err := resolveFile(root, rel)
	return abs, err
}

// resolveFile is resolve that also returns the missing parent dirs.
func resolveFile(root, rel string) (string, []string, error) {
	abs, absent, err := resolveParents(root, rel)
	if err != nil {
		return "", nil, err
	}
	if fi, err := os.Lstat(abs); err == nil && !fi.Mode().IsRegular() {
		return "", nil, fmt.Errorf("%w: %s is not a regular file (%s)", ErrInvalidPlan, rel, fi.Mode().Type())
	}
	return abs, absent, nil
}

// within reports whether p is dir or below it (both clean and absolute).
func within(dir, p string) bool {
	return p == dir || strings.HasPrefix(p, strings.TrimSuffix(dir, string(filepath.Separator))+string(filepath.Separator))
}

// hashRange is the hex SHA-256 of r in f; a short read is an error.
func hashRange(f io.ReaderAt, r Range) (string, error) {
	if r.Length == 0 {
		return sumBytes(nil), nil
	}
	h := sha256.New()
	n, err := io.Copy(h, io.NewSectionReader(f, r.Offset, r.Length))
	if err != nil {
		return "", err
	}
	if n != r.Length {
		return "", fmt.Errorf("short read: %d of %d bytes at %d", n, r.Length, r.Offset)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// hashWhole returns the size and hex SHA-256 of the file at path (holes
// of a sparse file are hashed without being read).
func hashWhole(path string) (int64, string, error) {
	f, err := storefile.OpenNoFollow(path)
	if err != nil {
		return 0, "", err
	}
	defer f.Close()
	h := sha256.New()
	n, err := hashSparse(h, f)
	if err != nil {
		return 0, "", err
	}
	return n, hex.EncodeToString(h.Sum(nil)), nil
}

// sourceState is a staged source's size and, when hash is set, its hex
// SHA-256 (hashWhole); without it the file need only be a regular file.
func sourceState(path string, hash bool) (int64, string, error) {
	if hash {
		return hashWhole(path)
	}
	st, err := os.Stat(path)
	if err != nil {
		return 0, "", err
	}
	if !st.Mode().IsRegular() {
		return 0, "", fmt.Errorf("%s is not a regular file", path)
	}
	return st.Size(), "", nil
}

// sumBytes is the hex SHA-256 of b.
func sumBytes(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}
