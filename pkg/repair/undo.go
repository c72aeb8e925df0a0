package repair

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/storectl/storectl/internal/storefile"
)

// UndoOptions tune Undo.
type UndoOptions struct {
	// Apply restores the files; without it Undo only describes what it would do.
	Apply bool
	// Force restores files that changed after the apply (no ErrStale). The
	// restored file must still hash to its pre-apply SHA-256, so this only
	// helps where the later change lies inside the saved pre-images or the
	// pre-image is the whole file.
	Force bool
	// DataDir overrides the manifest's data dir (the store was moved).
	DataDir string
	// Faults injects failures; tests only.
	Faults Faults
}

// Undo file and dir verdicts.
const (
	UndoRestore   = "restore"          // put back the pre-apply bytes
	UndoRemove    = "remove"           // the apply created the file: remove it
	UndoNothing   = "already-restored" // the file or dir is already as before the apply
	UndoTouch     = "restore-mtime"    // the bytes are back, the modification time is not (an undo killed at its last step)
	UndoRemoveDir = "remove-dir"       // the apply created the dir: remove it
	UndoCreateDir = "recreate-dir"     // the apply removed the dir: recreate it (or fix its mode and owner)
	UndoKeepDir   = "keep-dir"         // the apply created the dir, but it holds entries Undo does not remove
)

// UndoFile is the verdict for one file of the backup.
type UndoFile struct {
	Path          string `json:"path"`
	Action        string `json:"action"`
	Stale         bool   `json:"stale"` // changed since the apply (restored only with Force)
	SHA256Current string `json:"sha256_current"`
	SHA256After   string `json:"sha256_after"`
	SHA256Before  string `json:"sha256_before"`
	Done          bool   `json:"done"`
}

// UndoDir is the verdict for one dir the apply created or removed.
type UndoDir struct {
	Path   string `json:"path"`
	Action string `json:"action"`
	Stale  bool   `json:"stale"` // holds entries the apply did not create (kept, even with Force)
	Done   bool   `json:"done"`
}

// UndoReport says what Undo found and did.
type UndoReport struct {
	BackupDir string     `json:"backup_dir"`
	DataDir   string     `json:"data_dir"`
	State     string     `json:"state"` // the manifest state found
	Files     []UndoFile `json:"files"`
	Dirs      []UndoDir  `json:"dirs,omitempty"` // in manifest order
	Applied   bool       `json:"applied"`
	Steps     int        `json:"steps"`
	// Stages are staging files a killed Apply or Undo left beside the
	// files (a broker could take them for store files); an applying Undo
	// removes them.
	Stages []string `json:"stages,omitempty"`
	// Partial: the backup has no manifest.json: the apply that made it
	// stopped while writing it, before it changed anything (it writes the
	// manifest before its first change). Nothing to restore.
	Partial bool `json:"partial,omitempty"`
}

// ErrBadBackup is wrapped when a backup cannot put back what its manifest
// claims (a damaged pre-image, a size no pre-image and no current byte
// accounts for): Undo refuses before it writes anything.
var ErrBadBackup = errors.New("the backup cannot restore what its manifest describes")

// Undo puts back every byte an Apply changed, from the backup dir it wrote.
// It first checks that every file still has the hash the apply left (else
// ErrStale, unless Force) and that every needed pre-image is intact; each
// restored file is verified against its pre-apply SHA-256 before it
// replaces the current one. Dirs the apply removed are recreated (with
// their mode and owner) before the files are restored; dirs it created are
// removed after, deepest first, when nothing but what the apply created was
// in them (else ErrStale, and with Force they are kept). Files and dirs
// already restored are skipped, so an interrupted Undo can be run again.
//
// The journal (JournalName) says how far an apply got: a file whose bytes
// are a state its journal announced is the apply's doing, so an apply
// killed at any step undoes without Force; its last state line overrides
// the manifest's.
func Undo(ctx context.Context, backupDir string, o UndoOptions) (*UndoReport, error) {
	m, err := ReadManifest(backupDir)
	if errors.Is(err, os.ErrNotExist) && partialBackup(backupDir) {
		return &UndoReport{BackupDir: backupDir, Partial: true, Files: []UndoFile{}}, nil
	}
	if err != nil {
		return nil, err
	}
	js, err := ReadJournal(backupDir)
	if err != nil {
		return nil, err
	}
	state := m.State
	if s := journalState(js); s != "" {
		state = s
	}
	afters, inPlace := journalAfters(js)
	root := m.DataDir
	if o.DataDir != "" {
		root = o.DataDir
	}
	rep := &UndoReport{BackupDir: backupDir, DataDir: root, State: state}
	imgs := imagesByPath(m)
	var stale error
	for i := range m.Files {
		rec := &m.Files[i]
		known := afters[rec.Path]
		if state == StateApplied || state == StateUndone {
			known = append(known, fileAfter{rec.ExistsAfter, rec.SHA256After})
		}
		uf, err := classify(root, rec, known, inPlace[rec.Path])
		if err != nil {
			return rep, err
		}
		if uf.Stale && stale == nil {
			stale = &StaleError{Path: uf.Path, What: "sha256 since the apply", Expected: orAbsent(uf.SHA256After), Actual: orAbsent(uf.SHA256Current)}
		}
		if uf.Action == UndoRestore {
			if err := checkRestorable(root, rec, imgs[rec.Path]); err != nil {
				return rep, err
			}
		}
		if uf.Action != UndoNothing && uf.Action != UndoTouch {
			if err := verifyImages(backupDir, imgs[uf.Path]); err != nil {
				return rep, err
			}
		}
		rep.Files = append(rep.Files, uf)
		if _, err := os.Lstat(stagePath(filepath.Join(root, uf.Path))); err == nil {
			rep.Stages = append(rep.Stages, filepath.Join(filepath.Dir(uf.Path), StagePrefix+filepath.Base(uf.Path)))
		}
	}
	dirStale, err := classifyDirs(root, m, rep)
	if err != nil {
		return rep, err
	}
	if stale == nil {
		stale = dirStale
	}
	if stale != nil && !o.Force {
		return rep, stale
	}
	if !o.Apply {
		return rep, nil
	}
	w := &fsw{faults: o.Faults}
	defer func() { rep.Steps = w.n }()
	if err := undoDirs(ctx, w, root, m, rep, UndoCreateDir); err != nil {
		return rep, err
	}
	for i := len(m.Files) - 1; i >= 0; i-- {
		uf := &rep.Files[i]
		if uf.Action == UndoNothing {
			continue
		}
		err := ctx.Err()
		switch {
		case err != nil:
		case uf.Action == UndoTouch:
			err = w.step("chtimes " + uf.Path)
			if err == nil {
				mt := time.Unix(0, m.Files[i].MtimeNs)
				err = os.Chtimes(filepath.Join(root, uf.Path), mt, mt)
			}
		default:
			err = restoreFile(w, root, backupDir, &m.Files[i], imgs[uf.Path])
		}
		if err != nil {
			return rep, fmt.Errorf("%w: undo stopped at %s: %w (files restored so far stay restored; run undo again)", ErrApplyFailed, uf.Path, err)
		}
		uf.Done = true
	}
	for _, st := range rep.Stages {
		if err := w.remove(filepath.Join(root, st)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return rep, fmt.Errorf("%w: removing the leftover staging file %s: %w", ErrApplyFailed, st, err)
		}
		if err := w.syncDir(filepath.Dir(filepath.Join(root, st))); err != nil {
			return rep, fmt.Errorf("%w: %w", ErrApplyFailed, err)
		}
	}
	if err := undoDirs(ctx, w, root, m, rep, UndoRemoveDir); err != nil {
		return rep, err
	}
	// The outcome goes to the journal (its space is reserved) and to
	// manifest.json; either one is enough for the next undo.
	var jerr error
	if j, err := openJournal(backupDir); err == nil {
		jerr = j.add(w, JournalEntry{Op: JournalState, State: StateUndone})
		j.close()
	} else if !errors.Is(err, os.ErrNotExist) {
		jerr = err
	} else {
		jerr = err // no journal: an older backup, manifest.json alone
	}
	m.State = StateUndone
	if err := writeManifest(w, backupDir, m); err != nil && jerr != nil {
		return rep, fmt.Errorf("%w: every file was restored but neither the manifest nor the journal was updated: %w", ErrApplyFailed, err)
	}
	rep.State = StateUndone
	rep.Applied = true
	return rep, nil
}

// partialBackup: dir is what an Apply leaves when it is killed while it
// writes the backup: the dir, maybe its pre/ and files/ dirs, pre-images
// and a journal without a single commit, and no manifest.json. The data
// dir is untouched: the manifest is made durable before the first change.
// (An empty dir is one too: nothing can be restored from it.)
func partialBackup(dir string) bool {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	for _, e := range ents {
		switch e.Name() {
		case "pre", "files", JournalName, ManifestName + ".tmp":
		default:
			return false
		}
	}
	js, err := ReadJournal(dir)
	if err != nil {
		return false
	}
	for _, e := range js {
		if e.Op != JournalState {
			return false
		}
	}
	return true
}

// checkRestorable refuses (ErrBadBackup) a file record whose pre-apply
// bytes the backup and the current file cannot account for: a size out of
// range, a whole-file image of another length, a range image outside the
// file, or bytes between the current size and the recorded size that no
// pre-image holds (a manifest claiming 1 TiB would have undo create and
// hash a 1 TiB sparse file, then fail).
func checkRestorable(root string, rec *FileRecord, imgs []PreImage) error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: %s: %s", ErrBadBackup, rec.Path, fmt.Sprintf(format, a...))
	}
	if rec.Size < 0 || rec.Size > 4*MaxNewSize {
		return bad("recorded size %d out of range", rec.Size)
	}
	if len(imgs) == 1 && imgs[0].Whole {
		if imgs[0].Length != rec.Size {
			return bad("the whole-file pre-image holds %d bytes, the manifest says the file had %d", imgs[0].Length, rec.Size)
		}
		return nil
	}
	var rs []Range
	for _, img := range imgs {
		if img.Whole || img.Offset < 0 || img.Length < 0 || img.Offset+img.Length < img.Offset || img.Offset+img.Length > rec.Size {
			return bad("pre-image %s (%d+%d) lies outside the recorded %d bytes", img.File, img.Offset, img.Length, rec.Size)
		}
		rs = append(rs, Range{img.Offset, img.Length})
	}
	cur := int64(0)
	if fi, err := os.Lstat(filepath.Join(root, rec.Path)); err == nil {
		cur = fi.Size()
	}
	if rec.Size <= cur {
		return nil
	}
	sort.Slice(rs, func(i, j int) bool { return rs[i].Offset < rs[j].Offset })
	pos := cur
	for _, r := range rs {
		if r.End() <= pos {
			continue
		}
		if r.Offset > pos {
			break
		}
		pos = r.End()
	}
	if pos < rec.Size {
		return bad("the manifest says the file had %d bytes; the current file holds %d and the pre-images reach only %d", rec.Size, cur, pos)
	}
	return nil
}

// classify compares one file with its before state and the after states
// the apply left or announced (known); a file the rollback was rewriting
// in place (inPlace) may hold anything in between.
func classify(root string, rec *FileRecord, known []fileAfter, inPlace bool) (UndoFile, error) {
	uf := UndoFile{Path: rec.Path, SHA256Before: rec.SHA256Before, SHA256After: rec.SHA256After}
	if _, err := resolve(root, rec.Path); err != nil {
		return uf, err
	}
	abs := filepath.Join(root, rec.Path)
	_, cur, err := hashWhole(abs)
	exists := err == nil
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return uf, err
	}
	mtimeBack := true
	if fi, err := os.Lstat(abs); err == nil && rec.Existed {
		mtimeBack = fi.ModTime().UnixNano() == rec.MtimeNs
	}
	uf.SHA256Current = cur
	ours := inPlace
	for _, a := range known {
		ours = ours || a.exists == exists && (!exists || a.sha == cur)
	}
	switch {
	case exists == rec.Existed && cur == rec.SHA256Before && mtimeBack:
		uf.Action = UndoNothing
	case exists == rec.Existed && cur == rec.SHA256Before:
		uf.Action = UndoTouch
	case !rec.Existed:
		uf.Action = UndoRemove
		uf.Stale = !ours
	default:
		uf.Action = UndoRestore
		uf.Stale = !ours
	}
	return uf, nil
}

// verifyImages checks the length and SHA-256 of saved pre-images.
func verifyImages(bdir string, imgs []PreImage) error {
	for _, img := range imgs {
		n, sum, err := hashWhole(filepath.Join(bdir, img.File))
		if err != nil {
			return fmt.Errorf("%w: pre-image of action %s: %w", ErrBadBackup, img.Action, err)
		}
		if n != img.Length || sum != img.SHA256 {
			return fmt.Errorf("%w: pre-image %s is damaged (%d bytes, sha256 %s; manifest says %d, %s)", ErrBadBackup, img.File, n, sum, img.Length, img.SHA256)
		}
	}
	return nil
}

func orAbsent(s string) string {
	if s == "" {
		return "absent"
	}
	return s
}

// restoreFile puts rec back to its pre-apply bytes from the pre-images in
// bdir, verifying the result hashes to SHA256Before before it replaces the
// current file, and restores the mtime. A file the apply created is removed.
func restoreFile(w *fsw, root, bdir string, rec *FileRecord, imgs []PreImage) error {
	target := filepath.Join(root, rec.Path)
	if !rec.Existed {
		if err := w.remove(target); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return w.syncDir(filepath.Dir(target))
	}
	f, err := openStage(target)
	if err != nil {
		return err
	}
	committed := false
	defer func() {
		f.Close()
		if !committed {
			os.Remove(f.Name())
		}
	}()
	if err := buildRestore(w, f, target, bdir, rec, imgs); err != nil {
		return err
	}
	if committed, err = commitStage(w, f, target, rec, nil); err != nil {
		return err
	}
	if err := w.step("chtimes " + target); err != nil {
		return err
	}
	mt := time.Unix(0, rec.MtimeNs)
	return os.Chtimes(target, mt, mt)
}

// buildRestore writes the pre-apply content of rec into the stage f.
func buildRestore(w *fsw, f *os.File, target, bdir string, rec *FileRecord, imgs []PreImage) error {
	whole := len(imgs) == 1 && imgs[0].Whole
	if !whole {
		cur, err := storefile.OpenNoFollow(target)
		if err != nil {
			return fmt.Errorf("restoring %s: %w", rec.Path, err)
		}
		_, _, err = copyCounted(w, f, 0, cur)
		cur.Close()
		if err == nil {
			err = w.truncate(f, rec.Size)
		}
		if err != nil {
			return err
		}
	}
	for _, img := range imgs {
		src, err := storefile.OpenNoFollow(filepath.Join(bdir, img.File))
		if err != nil {
			return fmt.Errorf("pre-image of %s: %w", img.Action, err)
		}
		n, sum, err := copyCounted(w, f, img.Offset, src)
		src.Close()
		if err != nil {
			return err
		}
		if n != img.Length || sum != img.SHA256 {
			return fmt.Errorf("pre-image %s is damaged (%d bytes, sha256 %s; manifest says %d, %s)", img.File, n, sum, img.Length, img.SHA256)
		}
	}
	if whole {
		if err := w.truncate(f, rec.Size); err != nil {
			return err
		}
	}
	sum, err := hashRange(f, Range{0, rec.Size})
	if err == nil && sum != rec.SHA256Before {
		err = fmt.Errorf("restored %s hashes to %s, not its pre-apply %s", rec.Path, sum, rec.SHA256Before)
	}
	return err
}
