package repair

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
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
	RollbackErrors []string       `json:"rollback_errors,omitempty"` // files and dirs that could not be, and why
	StillChanged   []string       `json:"still_changed,omitempty"`   // files and dirs the apply changed that stay changed
	Warnings       []string       `json:"warnings,omitempty"`        // the apply went on, but something was not recorded
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
	var j *journal
	if err == nil {
		m, j, err = writeBackup(ctx, w, p, bdir)
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
	defer j.close()
	groups := groupActions(p, m)
	pr := progress{j: j}
	if err = pr.run(ctx, w, p.DataDir, bdir, m, groups); err == nil {
		// The outcome is durable once the journal says so (its space is
		// reserved); manifest.json then gets the after states for humans
		// and older storectl versions, at best effort: on a full disk the
		// journal alone tells undo what happened.
		if err = j.add(w, JournalEntry{Op: JournalState, State: StateApplied}); err == nil {
			m.State = StateApplied
			if merr := writeManifest(w, bdir, m); merr != nil {
				rep.Warnings = append(rep.Warnings, fmt.Sprintf("manifest.json not updated (%v); the journal records the apply, undo reads it", merr))
			}
		}
	}
	if err != nil {
		return rep, rollback(w, p.DataDir, bdir, m, groups, &pr, rep, err)
	}
	for _, d := range pr.made {
		rep.DirsCreated = append(rep.DirsCreated, d.Path)
	}
	fillReport(rep, m, func(string) string { return StatusApplied })
	return rep, nil
}

// progress is what an Apply changed so far, for the rollback.
type progress struct {
	j       *journal
	made    []*DirRecord // dirs created, parents first
	done    []int        // file groups changed
	removed []*DirRecord // dirs removed, deepest first
}

// run changes the data dir: it creates the missing parent dirs, changes
// each file, then removes the dirs of the remove-dir actions, recording in
// pr every change made (even when a later step of it failed). Each change
// is announced in the journal first, with the state it leaves.
func (pr *progress) run(ctx context.Context, w *fsw, root, bdir string, m *Manifest, groups []fileGroup) error {
	for _, d := range dirsOf(m, DirCreated) {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := pr.j.add(w, JournalEntry{Op: JournalMkdir, Path: d.Path}); err != nil {
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
		rec := g.rec
		announce := func(after fileAfter, size int64) error {
			rec.ExistsAfter, rec.SizeAfter, rec.SHA256After = after.exists, size, after.sha
			return pr.j.add(w, JournalEntry{Op: JournalCommit, Path: rec.Path, Exists: after.exists, Size: size, SHA256: after.sha})
		}
		committed, err := applyFile(w, root, bdir, rec, g.acts, announce)
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
		if err := pr.j.add(w, JournalEntry{Op: JournalRmdir, Path: d.Path}); err != nil {
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

// imagesByPath indexes the manifest's pre-images by file, in manifest
// order (one pass: a plan of 100,000 actions has as many images).
func imagesByPath(m *Manifest) map[string][]PreImage {
	out := make(map[string][]PreImage, len(m.Files))
	for _, img := range m.Images {
		out[img.Path] = append(out[img.Path], img)
	}
	return out
}

// rollback undoes what pr records: it recreates the removed dirs (parents
// first), restores the changed files (in reverse order; a file that cannot
// be staged again, as on a full disk, gets its pre-images written back in
// place when that needs no new space), removes the created dirs (deepest
// first, only if empty), records each outcome in the journal, and returns
// the error for Apply to return. The report then says, path by path, what
// was restored and what is still changed; the journal and manifest.json
// say rolled-back or rollback-incomplete. Never faulted (FailAtWrite) but
// for the Injector, whose disk may still be full; its steps go on counting.
func rollback(aw *fsw, root, bdir string, m *Manifest, groups []fileGroup, pr *progress, rep *ApplyReport, cause error) error {
	if aw.faults.noRollback {
		return fmt.Errorf("%w: %w (simulated crash: no rollback)", ErrApplyFailed, cause)
	}
	w := &fsw{faults: Faults{skipSync: aw.faults.skipSync, Injector: aw.faults.Injector}, n: aw.n}
	defer func() { aw.n = w.n }()
	restored := map[string]bool{} // paths put back
	failed := map[string]bool{}   // paths changed and not put back
	note := func(path string, err error) {
		if err != nil {
			failed[path] = true
			rep.RollbackErrors = append(rep.RollbackErrors, fmt.Sprintf("%s: %v", path, err))
			rep.StillChanged = append(rep.StillChanged, path)
			_ = pr.j.add(w, JournalEntry{Op: JournalRestoreFailed, Path: path, Error: err.Error()})
			return
		}
		restored[path] = true
		rep.RolledBack = append(rep.RolledBack, path)
		_ = pr.j.add(w, JournalEntry{Op: JournalRestored, Path: path})
	}
	for i := len(pr.removed) - 1; i >= 0; i-- {
		d := pr.removed[i]
		_, err := makeDir(w, root, d)
		if err != nil {
			err = fmt.Errorf("recreating the dir: %w", err)
		}
		note(d.Path, err)
	}
	imgs := imagesByPath(m)
	for i := len(pr.done) - 1; i >= 0; i-- {
		rec := groups[pr.done[i]].rec
		err := restoreFile(w, root, bdir, rec, imgs[rec.Path])
		if err != nil && inPlaceRestorable(root, rec, imgs[rec.Path]) {
			if jerr := pr.j.add(w, JournalEntry{Op: JournalInPlace, Path: rec.Path}); jerr == nil {
				if ierr := restoreInPlace(w, root, bdir, rec, imgs[rec.Path]); ierr == nil {
					err = nil
				} else {
					err = fmt.Errorf("%v; in place: %v", err, ierr)
				}
			}
		}
		note(rec.Path, err)
	}
	for i := len(pr.made) - 1; i >= 0; i-- {
		d := pr.made[i]
		_, err := removeDir(w, root, d.Path)
		if err != nil {
			err = fmt.Errorf("removing the dir the apply created: %w", err)
		}
		note(d.Path, err)
	}
	done := map[string]bool{}
	for _, gi := range pr.done {
		done[groups[gi].rec.Path] = true
	}
	for _, d := range pr.removed {
		done[d.Path] = true
	}
	fillReport(rep, m, func(path string) string {
		switch {
		case failed[path]:
			return StatusApplied // changed, and still changed
		case restored[path] && done[path]:
			return StatusRolledBack
		}
		return StatusNotApplied
	})
	state := StateRolledBack
	if len(rep.StillChanged) > 0 {
		state = StateRollbackIncomplete
	}
	jerr := pr.j.add(w, JournalEntry{Op: JournalState, State: state})
	m.State = state
	if merr := writeManifest(w, bdir, m); merr != nil && jerr != nil {
		rep.Warnings = append(rep.Warnings, fmt.Sprintf("neither the journal nor manifest.json could record the %s (%v; %v)", state, jerr, merr))
	}
	if len(rep.StillChanged) > 0 {
		return fmt.Errorf("%w: %w; ROLLBACK INCOMPLETE: %d path(s) still changed (%s), %d restored; the backup is in %s: remove the cause, then run storectl undo %s --apply",
			ErrApplyFailed, cause, len(rep.StillChanged), strings.Join(firstPaths(rep.StillChanged, 10), ", "), len(rep.RolledBack), bdir, bdir)
	}
	return fmt.Errorf("%w: %w; rolled back %d path(s) from %s", ErrApplyFailed, cause, len(rep.RolledBack), bdir)
}

// firstPaths is at most n of ps, and how many more there are.
func firstPaths(ps []string, n int) []string {
	if len(ps) <= n {
		return ps
	}
	return append(append([]string(nil), ps[:n]...), fmt.Sprintf("and %d more", len(ps)-n))
}

func newReport(p *Plan, bdir string) *ApplyReport {
	rep := &ApplyReport{DataDir: p.DataDir, BackupDir: bdir}
	for _, a := range p.Actions {
		rep.Actions = append(rep.Actions, ActionResult{ID: a.ID, Op: a.Op, Path: a.Path, Reason: a.Reason, SHA256Before: a.Pre.SHA256, BytesChanged: bytesChanged(&a), Status: StatusNotApplied})
	}
	return rep
}

// fillReport copies the manifest's before/after hashes into the report
// and gives each action the status of its path.
func fillReport(rep *ApplyReport, m *Manifest, status func(path string) string) {
	recs := make(map[string]*FileRecord, len(m.Files))
	for i := range m.Files {
		recs[m.Files[i].Path] = &m.Files[i]
	}
	for i := range rep.Actions {
		ar := &rep.Actions[i]
		if rec := recs[ar.Path]; rec != nil {
			ar.SHA256Before, ar.SHA256After = rec.SHA256Before, rec.SHA256After
		}
		ar.Status = status(ar.Path)
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
	for _, name := range []string{"pre", "files", ManifestName, ManifestName + ".tmp", JournalName} {
		_ = os.RemoveAll(filepath.Join(dir, name))
	}
}
