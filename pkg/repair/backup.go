package repair

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/storectl/storectl/internal/storefile"
)

// ManifestSchema versions manifest.json. Bump it on any breaking change.
const ManifestSchema = "storectl.backup/v1"

// ManifestSchemaDirs versions a manifest that creates or removes dirs
// (Manifest.Dirs): a storectl that predates dirs would ignore them and
// undo such an apply only in part, so it must refuse the manifest. A
// manifest without dirs keeps ManifestSchema.
const ManifestSchemaDirs = "storectl.backup/v2"

// ManifestName is the manifest's file name inside a backup dir.
const ManifestName = "manifest.json"

// ErrBackupDir is wrapped when the backup dir is unusable: inside the data
// dir, not empty, or not a directory. Nothing has been written.
var ErrBackupDir = errors.New("unusable backup dir")

// Manifest states.
const (
	StatePrepared   = "prepared"    // pre-images written, data dir not yet (fully) changed
	StateApplied    = "applied"     // every action applied; AFTER hashes recorded
	StateRolledBack = "rolled-back" // apply failed and every change was rolled back
	StateUndone     = "undone"      // Undo restored every file
	// StateRollbackIncomplete: apply failed and some changes could not be
	// rolled back (the journal says which); undo restores them.
	StateRollbackIncomplete = "rollback-incomplete"
)

// Manifest is manifest.json: everything Undo needs to put back every byte.
type Manifest struct {
	Schema  string       `json:"schema"`
	State   string       `json:"state"`
	DataDir string       `json:"data_dir"`
	Created time.Time    `json:"created"`
	Plan    Plan         `json:"plan"`
	Files   []FileRecord `json:"files"`
	Images  []PreImage   `json:"pre_images"`
	// Dirs are the dirs the apply creates (parents first), then those it
	// removes (deepest first).
	Dirs []DirRecord `json:"dirs,omitempty"`
}

// FileRecord is one affected file before and after the apply.
type FileRecord struct {
	Path         string `json:"path"`
	Existed      bool   `json:"existed"`
	Size         int64  `json:"size"`
	Mode         uint32 `json:"mode"`
	UID          int    `json:"uid"`
	GID          int    `json:"gid"`
	MtimeNs      int64  `json:"mtime_ns"`
	SHA256Before string `json:"sha256_before,omitempty"`
	ExistsAfter  bool   `json:"exists_after"`
	SizeAfter    int64  `json:"size_after"`
	SHA256After  string `json:"sha256_after,omitempty"`
}

// PreImage is the saved copy of the bytes one action changes: a range
// (Whole=false) or the whole file. File is relative to the backup dir.
type PreImage struct {
	Action string `json:"action"`
	Path   string `json:"path"`
	Op     Op     `json:"op"`
	File   string `json:"file"`
	Offset int64  `json:"offset"`
	Length int64  `json:"length"`
	Whole  bool   `json:"whole"`
	SHA256 string `json:"sha256"`
}

// DefaultBackupDir is a new dir beside (never inside) dataDir:
// <parent>/<basename>.storectl-backup-<UTC timestamp>.
func DefaultBackupDir(dataDir string, now time.Time) string {
	clean := filepath.Clean(dataDir)
	return filepath.Join(filepath.Dir(clean), filepath.Base(clean)+".storectl-backup-"+now.UTC().Format("20060102T150405Z"))
}

// checkBackupDir refuses a backup dir equal to or inside the data dir
// (symlinks resolved): a backup there would be scanned as store files and
// lost with the data dir.
func checkBackupDir(dataDir, backupDir string) error {
	realData, err := filepath.EvalSymlinks(dataDir)
	if err != nil {
		return err
	}
	realBackup, err := evalExisting(backupDir)
	if err != nil {
		return err
	}
	if within(realData, realBackup) {
		return fmt.Errorf("%w: %s is inside the data dir %s; choose a dir beside it", ErrBackupDir, backupDir, dataDir)
	}
	return nil
}

// evalExisting resolves symlinks in the longest existing prefix of p.
func evalExisting(p string) (string, error) {
	p, err := filepath.Abs(p)
	if err != nil {
		return "", err
	}
	var rest []string
	for {
		real, err := filepath.EvalSymlinks(p)
		if err == nil {
			return filepath.Join(append([]string{real}, rest...)...), nil
		}
		if !errors.Is(err, fs.ErrNotExist) || filepath.Dir(p) == p {
			return "", err
		}
		rest = append([]string{filepath.Base(p)}, rest...)
		p = filepath.Dir(p)
	}
}

// prepareBackupDir creates dir (or accepts an existing empty one) with its
// pre/ and files/ sub-dirs; created says whether Apply made dir itself.
func prepareBackupDir(w *fsw, dir string) (created bool, err error) {
	ents, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if err := w.mkdir(dir); err != nil {
			if errors.Is(err, ErrInjected) {
				return false, err
			}
			return false, fmt.Errorf("%w: %v", ErrBackupDir, err)
		}
		created = true
	case err != nil:
		return false, fmt.Errorf("%w: %v", ErrBackupDir, err)
	case len(ents) > 0:
		return false, fmt.Errorf("%w: %s is not empty", ErrBackupDir, dir)
	}
	for _, sub := range []string{"pre", "files"} {
		if err := w.mkdir(filepath.Join(dir, sub)); err != nil {
			return created, err
		}
	}
	return created, nil
}

// writeBackup records every affected file and dir and writes the pre-image
// of every byte the plan changes, then manifest.json (state prepared). The
// pre-image of a removed file is the file itself, moved there by the apply
// step; a removed dir is recorded by its mode and owner. The journal is
// created (its space reserved) before the manifest.
func writeBackup(ctx context.Context, w *fsw, p *Plan, dir string) (*Manifest, *journal, error) {
	m := &Manifest{Schema: ManifestSchema, State: StatePrepared, DataDir: p.DataDir, Created: time.Now().UTC(), Plan: *p}
	dirs, err := recordDirs(p.DataDir, p)
	if err != nil {
		return nil, nil, err
	}
	if len(dirs) > 0 {
		m.Schema, m.Dirs = ManifestSchemaDirs, dirs
	}
	seen := map[string]int{}
	for i := range p.Actions {
		if err := ctx.Err(); err != nil {
			return nil, nil, err
		}
		a := &p.Actions[i]
		if a.Op == OpRemoveDir {
			continue
		}
		if _, ok := seen[a.Path]; !ok {
			rec, err := recordFile(p.DataDir, a.Path, a.Pre)
			if err != nil {
				return nil, nil, err
			}
			seen[a.Path] = len(m.Files)
			m.Files = append(m.Files, rec)
		}
		rec := m.Files[seen[a.Path]]
		img, err := savePreImage(w, p.DataDir, dir, a, rec)
		if err != nil {
			return nil, nil, err
		}
		if img != nil {
			m.Images = append(m.Images, *img)
		}
	}
	// The journal exists (its space reserved) before the manifest that
	// allows the first change of the data dir.
	jr, err := createJournal(w, dir, m)
	if err != nil {
		return nil, nil, err
	}
	if err := writeManifest(w, dir, m); err != nil {
		jr.close()
		return nil, nil, err
	}
	return m, jr, nil
}

// recordFile stats and hashes one affected file, re-checking the plan's
// whole-file hash if it has one.
func recordFile(root, rel string, pre FileState) (FileRecord, error) {
	rec := FileRecord{Path: rel}
	abs, err := resolve(root, rel)
	if err != nil {
		return rec, err
	}
	fi, err := os.Lstat(abs)
	if errors.Is(err, fs.ErrNotExist) {
		return rec, nil
	}
	if err != nil {
		return rec, err
	}
	rec.Existed, rec.Size, rec.Mode, rec.MtimeNs = true, fi.Size(), uint32(fi.Mode().Perm()), fi.ModTime().UnixNano()
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		rec.UID, rec.GID = int(st.Uid), int(st.Gid)
	}
	if _, rec.SHA256Before, err = hashWhole(abs); err != nil {
		return rec, err
	}
	if pre.SHA256 != "" && pre.SHA256 != rec.SHA256Before {
		return rec, &StaleError{Path: rel, What: "sha256", Expected: pre.SHA256, Actual: rec.SHA256Before}
	}
	return rec, nil
}

// savePreImage copies the bytes action a changes into the backup dir and
// checks them against the plan's range hash.
func savePreImage(w *fsw, root, dir string, a *Action, rec FileRecord) (*PreImage, error) {
	r, ok := a.Changed(rec.Size)
	whole := a.Op == OpRemoveFile || a.Op == OpReplaceFile
	if !rec.Existed || !ok && !whole { // whole-file ops keep even an empty file
		return nil, nil
	}
	img := &PreImage{Action: a.ID, Path: a.Path, Op: a.Op, File: "pre/" + a.ID + ".bin", Offset: r.Offset, Length: r.Length, Whole: whole}
	if whole {
		img.File, img.SHA256 = "files/"+a.ID, rec.SHA256Before
		if a.Op == OpRemoveFile {
			return img, nil // moved there by applyFile
		}
	}
	src, err := storefile.OpenNoFollow(filepath.Join(root, a.Path))
	if err != nil {
		return nil, err
	}
	defer src.Close()
	dst, err := os.OpenFile(filepath.Join(dir, img.File), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return nil, err
	}
	n, sum, err := copyCounted(w, dst, 0, io.NewSectionReader(src, r.Offset, r.Length))
	if err == nil && n != r.Length {
		err = fmt.Errorf("%s: short read of pre-image: %d of %d bytes", a.Path, n, r.Length)
	}
	if err == nil {
		err = w.sync(dst)
	}
	if cerr := dst.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, err
	}
	if want := rangeSum(a.Pre, r); want != "" && want != sum && !whole {
		return nil, &StaleError{Path: a.Path, What: fmt.Sprintf("range %d+%d sha256", r.Offset, r.Length), Expected: want, Actual: sum}
	}
	if whole && sum != rec.SHA256Before {
		return nil, &StaleError{Path: a.Path, What: "sha256", Expected: rec.SHA256Before, Actual: sum}
	}
	img.SHA256 = sum
	return img, w.syncDir(filepath.Dir(filepath.Join(dir, img.File)))
}

func rangeSum(st FileState, r Range) string {
	for _, h := range st.Ranges {
		if h.Offset == r.Offset && h.Length == r.Length {
			return h.SHA256
		}
	}
	return ""
}

// writeManifest replaces dir/manifest.json atomically (temp file, fsync,
// rename, fsync dir).
func writeManifest(w *fsw, dir string, m *Manifest) error {
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	tmp := filepath.Join(dir, ManifestName+".tmp")
	_ = os.Remove(tmp)
	if err := w.writeFile(tmp, append(b, '\n')); err != nil {
		return err
	}
	if err := w.rename(tmp, filepath.Join(dir, ManifestName)); err != nil {
		return err
	}
	return w.syncDir(dir)
}

// ReadManifest loads dir/manifest.json.
func ReadManifest(dir string) (*Manifest, error) {
	b, err := storefile.ReadFile(filepath.Join(dir, ManifestName))
	if err != nil {
		return nil, err
	}
	var m Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("%s: %w", ManifestName, err)
	}
	if m.Schema != ManifestSchema && m.Schema != ManifestSchemaDirs {
		return nil, fmt.Errorf("%s: schema %q, want %q or %q", ManifestName, m.Schema, ManifestSchema, ManifestSchemaDirs)
	}
	for _, d := range m.Dirs {
		if !cleanRel(d.Path) || d.Change != DirCreated && d.Change != DirRemoved {
			return nil, fmt.Errorf("%s: dir record %q (%s) is not a clean path inside the data dir with a known change", ManifestName, d.Path, d.Change)
		}
	}
	for _, img := range m.Images {
		if !strings.HasPrefix(img.File, "pre/") && !strings.HasPrefix(img.File, "files/") || !filepath.IsLocal(img.File) {
			return nil, fmt.Errorf("%s: pre-image file %q outside the backup dir", ManifestName, img.File)
		}
	}
	return &m, nil
}

// RemoveStage removes a planner's staging dir (*dir) and clears *dir, so
// a second call is a no-op. Planners that stage replacement files beside
// the data dir call it after Apply, or when a plan is abandoned.
func RemoveStage(dir *string) error {
	if dir == nil || *dir == "" {
		return nil
	}
	if err := os.RemoveAll(*dir); err != nil {
		return err
	}
	*dir = ""
	return nil
}
