package repair

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// ApplyOptions tune Apply.
type ApplyOptions struct {
	// BackupDir receives the pre-images and manifest.json. It must not exist
	// or be empty, and must not be inside the data dir. Empty means
	// DefaultBackupDir(plan.DataDir, time.Now()).
	BackupDir string
	// MaxRemoveBytes, when > 0, refuses (ErrLimit) a plan whose LostBytes
	// exceed it, before anything is written: a guard against a planner bug
	// that would zero or cut far more than a torn tail.
	MaxRemoveBytes int64
	// DataDir, when set, is the data dir the caller means to change: a
	// plan made for another dir (symlinks resolved, then by device and
	// inode) is refused with ErrWrongDataDir before anything is read or
	// written. A saved plan names its data dir; applying it to the dir on
	// the command line must never change a third one.
	DataDir string
	// Faults injects failures; tests only.
	Faults Faults
}

// ErrWrongDataDir is wrapped when a plan is applied to a data dir other
// than the one it was made for; nothing has been written.
var ErrWrongDataDir = errors.New("the plan was made for another data dir")

// CheckDataDir refuses (ErrWrongDataDir) a plan whose data dir is not dir.
func (p *Plan) CheckDataDir(dir string) error {
	if SameDir(p.DataDir, dir) {
		return nil
	}
	return fmt.Errorf("%w: it names %s, the command names %s", ErrWrongDataDir, p.DataDir, dir)
}

// SameDir reports whether a and b are one directory: equal once symlinks
// are resolved, or the same device and inode.
func SameDir(a, b string) bool {
	ra, err1 := filepath.EvalSymlinks(a)
	rb, err2 := filepath.EvalSymlinks(b)
	if err1 != nil || err2 != nil {
		return false
	}
	if ra == rb {
		return true
	}
	sa, err1 := os.Stat(ra)
	sb, err2 := os.Stat(rb)
	return err1 == nil && err2 == nil && sa.IsDir() && os.SameFile(sa, sb)
}

// Action statuses in an ApplyReport.
const (
	StatusApplied    = "applied"     // the action's file was changed and stays changed
	StatusRolledBack = "rolled-back" // it was changed, then restored from the backup
	StatusNotApplied = "not-applied" // its file was never changed
)

// ActionResult is what happened to one action. The hashes are of the whole
// file before the apply and after it ("" for a file that does not exist).
type ActionResult struct {
	ID           string `json:"id"`
	Op           Op     `json:"op"`
	Path         string `json:"path"`
	Reason       string `json:"reason"`
	SHA256Before string `json:"sha256_before"`
	SHA256After  string `json:"sha256_after"`
	BytesChanged int64  `json:"bytes_changed"`
	Status       string `json:"status"`
}

// ApplyReport says what Apply did, including after a failure.
type ApplyReport struct {
	DataDir        string         `json:"data_dir"`
	BackupDir      string         `json:"backup_dir"`
	Actions        []ActionResult `json:"actions"`
	RolledBack     []string       `json:"rolled_back,omitempty"`     // files and dirs put back from the backup
	RollbackErrors []string       `json:"rollback_errors,omitempty"` // files and dirs that could not be
	DirsCreated    []string       `json:"dirs_created,omitempty"`    // missing parent dirs the apply created
	Steps          int            `json:"steps"`                     // counted write steps taken (see Faults)
}

// Apply performs a plan: it checks every precondition (ErrStale, nothing
// written), writes the backup with manifest.json, creates the missing
// parent dirs of new files, changes each file through a staging file,
// fsync, rename and directory fsync, then removes the dirs of remove-dir
// actions, deepest first (each must be empty by then). If anything fails
// part-way, every dir and file already changed is put back from the backup
// and the error wraps ErrApplyFailed; the report says what was rolled back.
func Apply(ctx context.Context, p *Plan, o ApplyOptions) (*ApplyReport, error) {
	if p.printOnly {
		return nil, ErrPrintOnly
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if o.DataDir != "" {
		if err := p.CheckDataDir(o.DataDir); err != nil {
			return nil, err
		}
	}
	if lost := p.LostBytes(); o.MaxRemoveBytes > 0 && lost > o.MaxRemoveBytes {
		return nil, fmt.Errorf("%w: the plan overwrites or removes %d bytes, more than the limit of %d", ErrLimit, lost, o.MaxRemoveBytes)
	}
	if err := p.Check(p.DataDir); err != nil {
		return nil, err
	}
	if len(p.Actions) == 0 {
		return &ApplyReport{DataDir: p.DataDir, Actions: []ActionResult{}}, nil // nothing to change, nothing to back up
	}
	bdir := o.BackupDir
	if bdir == "" {
		bdir = DefaultBackupDir(p.DataDir, time.Now())
	}
	bdir, err := filepath.Abs(bdir)
	if err != nil {
		return nil, err
	}
	if err := checkBackupDir(p.DataDir, bdir); err != nil {
		return nil, err
	}
	w := &fsw{faults: o.Faults}
	rep := newReport(p, bdir)
	defer func() { rep.Steps = w.n }()
	created, err := prepareBackupDir(w, bdir)
	var m *Manifest
	if err == nil {
		m, err = writeBackup(ctx, w, p, bdir)
	}
	if err != nil {
		if errors.Is(err, ErrBackupDir) {
			return nil, err // refused before creating anything: leave the dir alone
		}
		if !o.Faults.noRollback {
			cleanupBackup(bdir, created) // the dir was empty or ours
		}
		if errors.Is(err, ErrStale) {
			return nil, err
		}
		return rep, fmt.Errorf("%w: writing the backup: %w (the data dir was not changed)", ErrApplyFailed, err)
	}
	groups := groupActions(p, m)
	var pr progress
	if err = pr.run(ctx, w, p.DataDir, bdir, m, groups); err == nil {
		if err = recordAfter(p.DataDir, m); err == nil {
			m.State = StateApplied
			err = writeManifest(w, bdir, m)
		}
	}
	if err != nil {
		return rep, rollback(w, p.DataDir, bdir, m, groups, &pr, rep, err)
	}
	for _, d := range pr.made {
		rep.DirsCreated = append(rep.DirsCreated, d.Path)
	}
	fillReport(rep, p, m, StatusApplied)
	return rep, nil
}

// progress is what an Apply changed so far, for the rollback.
type progress struct {
	made    []*DirRecord // dirs created, parents first
	done    []int        // file groups changed
	removed []*DirRecord // dirs removed, deepest first
}

// run changes the data dir: it creates the missing parent dirs, changes
// each file, then removes the dirs of the remove-dir actions, recording in
// pr every change made (even when a later step of it failed).
func (pr *progress) run(ctx context.Context, w *fsw, root, bdir string, m *Manifest, groups []fileGroup) error {
	for _, d := range dirsOf(m, DirCreated) {
		if err := ctx.Err(); err != nil {
			return err
		}
		made, err := makeDir(w, root, d)
		if made {
			pr.made = append(pr.made, d)
		}
		if err == nil && !made {
			err = &StaleError{Path: d.Path, What: "existence", Expected: "absent", Actual: "present"}
		}
		if err != nil {
			return err
		}
	}
	for gi, g := range groups {
		if err := ctx.Err(); err != nil {
			return err
		}
		committed, err := applyFile(w, root, bdir, g.rec, g.acts)
		if committed {
			pr.done = append(pr.done, gi)
		}
		if err != nil {
			return err
		}
	}
	for _, d := range dirsOf(m, DirRemoved) {
		if err := ctx.Err(); err != nil {
			return err
		}
		removed, err := removeDir(w, root, d.Path)
		if removed {
			pr.removed = append(pr.removed, d)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// fileGroup is the actions of one file, in plan order.
type fileGroup struct {
	rec  *FileRecord
	acts []*Action
}

// groupActions groups the file actions by file in the order of m.Files
// (first appearance in the plan); remove-dir actions are in m.Dirs.
func groupActions(p *Plan, m *Manifest) []fileGroup {
	groups := make([]fileGroup, len(m.Files))
	idx := map[string]int{}
	for i := range m.Files {
		groups[i].rec = &m.Files[i]
		idx[m.Files[i].Path] = i
	}
	for i := range p.Actions {
		if p.Actions[i].Op == OpRemoveDir {
			continue
		}
		gi := idx[p.Actions[i].Path]
		groups[gi].acts = append(groups[gi].acts, &p.Actions[i])
	}
	return groups
}

// imagesOf returns the pre-images of one file.
func imagesOf(m *Manifest, path string) []PreImage {
	var out []PreImage
	for _, img := range m.Images {
		if img.Path == path {
			out = append(out, img)
		}
	}
	return out
}

// rollback undoes what pr records, never faulted: it recreates the removed
// dirs (parents first), restores the changed files (in reverse order),
// removes the created dirs (deepest first, only if empty), marks the
// manifest and returns the error for Apply to return.
func rollback(aw *fsw, root, bdir string, m *Manifest, groups []fileGroup, pr *progress, rep *ApplyReport, cause error) error {
	if aw.faults.noRollback {
		return fmt.Errorf("%w: %w (simulated crash: no rollback)", ErrApplyFailed, cause)
	}
	// Never faulted (FailAtWrite) but for the Injector, whose disk may
	// still be full; its steps go on counting.
	w := &fsw{faults: Faults{skipSync: aw.faults.skipSync, Injector: aw.faults.Injector}, n: aw.n}
	for i := len(pr.removed) - 1; i >= 0; i-- {
		d := pr.removed[i]
		if _, err := makeDir(w, root, d); err != nil {
			rep.RollbackErrors = append(rep.RollbackErrors, fmt.Sprintf("%s: recreating the dir: %v", d.Path, err))
			continue
		}
		rep.RolledBack = append(rep.RolledBack, d.Path)
	}
	for i := len(pr.done) - 1; i >= 0; i-- {
		rec := groups[pr.done[i]].rec
		if err := restoreFile(w, root, bdir, rec, imagesOf(m, rec.Path)); err != nil {
			rep.RollbackErrors = append(rep.RollbackErrors, fmt.Sprintf("%s: %v", rec.Path, err))
			continue
		}
		rep.RolledBack = append(rep.RolledBack, rec.Path)
	}
	for i := len(pr.made) - 1; i >= 0; i-- {
		d := pr.made[i]
		if _, err := removeDir(w, root, d.Path); err != nil {
			rep.RollbackErrors = append(rep.RollbackErrors, fmt.Sprintf("%s: removing the dir the apply created: %v", d.Path, err))
			continue
		}
		rep.RolledBack = append(rep.RolledBack, d.Path)
	}
	fillReport(rep, &m.Plan, m, StatusNotApplied)
	for i := range rep.Actions {
		for _, path := range rep.RolledBack {
			if rep.Actions[i].Path == path {
				rep.Actions[i].Status = StatusRolledBack
			}
		}
	}
	if len(rep.RollbackErrors) > 0 {
		return fmt.Errorf("%w: %w; ROLLBACK INCOMPLETE for %d path(s), the backup is in %s (storectl undo --force)", ErrApplyFailed, cause, len(rep.RollbackErrors), bdir)
	}
	m.State = StateRolledBack
	_ = writeManifest(w, bdir, m) // best effort: the files are already restored
	return fmt.Errorf("%w: %w; rolled back %d path(s) from %s", ErrApplyFailed, cause, len(rep.RolledBack), bdir)
}

// recordAfter stores each file's size and hash after the apply.
func recordAfter(root string, m *Manifest) error {
	for i := range m.Files {
		rec := &m.Files[i]
		size, sum, err := hashWhole(filepath.Join(root, rec.Path))
		if errors.Is(err, os.ErrNotExist) {
			rec.ExistsAfter, rec.SizeAfter, rec.SHA256After = false, 0, ""
			continue
		}
		if err != nil {
			return err
		}
		rec.ExistsAfter, rec.SizeAfter, rec.SHA256After = true, size, sum
	}
	return nil
}

func newReport(p *Plan, bdir string) *ApplyReport {
	rep := &ApplyReport{DataDir: p.DataDir, BackupDir: bdir}
	for _, a := range p.Actions {
		rep.Actions = append(rep.Actions, ActionResult{ID: a.ID, Op: a.Op, Path: a.Path, Reason: a.Reason, SHA256Before: a.Pre.SHA256, BytesChanged: bytesChanged(&a), Status: StatusNotApplied})
	}
	return rep
}

// fillReport copies the manifest's before/after hashes into the report.
func fillReport(rep *ApplyReport, p *Plan, m *Manifest, status string) {
	recs := map[string]*FileRecord{}
	for i := range m.Files {
		recs[m.Files[i].Path] = &m.Files[i]
	}
	for i := range rep.Actions {
		ar := &rep.Actions[i]
		if rec := recs[ar.Path]; rec != nil {
			ar.SHA256Before, ar.SHA256After = rec.SHA256Before, rec.SHA256After
		}
		ar.Status = status
	}
}

// bytesChanged is the bytes of the file written or removed by a:
// the range length, the size difference, the removed file's size or the
// replacement's size.
func bytesChanged(a *Action) int64 {
	switch a.Op {
	case OpZeroRange, OpWriteRange:
		return a.Length
	case OpTruncateFile, OpResizeFile:
		if d := a.Pre.Size - a.NewSize; d > 0 {
			return d
		}
		return a.NewSize - a.Pre.Size
	case OpRemoveFile:
		return a.Pre.Size
	case OpReplaceFile:
		return a.NewSize
	}
	return 0
}

// cleanupBackup removes what a failed Apply wrote before touching the data
// dir, so the same --backup-dir can be used again.
func cleanupBackup(dir string, created bool) {
	if created {
		_ = os.RemoveAll(dir)
		return
	}
	for _, name := range []string{"pre", "files", ManifestName, ManifestName + ".tmp"} {
		_ = os.RemoveAll(filepath.Join(dir, name))
	}
}
