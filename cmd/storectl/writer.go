package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/storectl/storectl/pkg/repair"
	rabbitrepair "github.com/storectl/storectl/pkg/repair/rabbitmq"
	"github.com/storectl/storectl/pkg/report"
	"github.com/storectl/storectl/pkg/scan"
	rabbitscan "github.com/storectl/storectl/pkg/scan/rabbitmq"
)

// writerOptions are the flags every writing command shares. --apply,
// --yes, --plan and --force are read from the command line only.
type writerOptions struct {
	Apply     bool
	Yes       bool
	Force     bool
	PlanFile  string
	PlanOut   string
	BackupDir string
	MaxBytes  int64
}

func addWriterFlags(cmd *cobra.Command, wo *writerOptions) {
	f := cmd.Flags()
	f.BoolVar(&wo.Apply, "apply", false, "write the changes (after a backup); without it only the plan is printed")
	f.BoolVar(&wo.Yes, "yes", false, "do not ask for confirmation (required with --apply when stdin is not a terminal)")
	f.BoolVar(&wo.Force, "force", false, "apply even though the broker looks live (dangerous)")
	f.StringVar(&wo.PlanFile, "plan", "", "apply this saved plan instead of deriving a new one (with --apply)")
	f.String("plan-out", "", "save the plan as JSON to this file")
	f.String("backup-dir", "", "where pre-images go (default: a new dir beside the data dir)")
	f.Int64("max-truncate-bytes", 0, "refuse a plan that removes or overwrites more than this many bytes (0: no limit)")
}

// planner derives a plan for the data dir; scanned is the scan the plan
// came from (its files, findings and bytes are a dry run's report; nil
// when the planner has none), extra a store-specific description added
// to the summary.
type planner func(ctx context.Context) (p *repair.Plan, scanned *scan.Result, extra map[string]any, err error)

// verifier re-checks the store after an apply.
type verifier func(ctx context.Context) (*scan.Result, error)

// actionRecord is the `action` object of the contract.
type actionRecord struct {
	Status       string      `json:"status"` // planned | applied | rolled-back | restored
	ID           string      `json:"id,omitempty"`
	Op           string      `json:"op"`
	Path         string      `json:"path"`
	Offset       int64       `json:"offset"`
	Length       int64       `json:"length"`
	NewSize      *int64      `json:"new_size,omitempty"`
	Reason       string      `json:"reason,omitempty"`
	Lost         repair.Loss `json:"lost"`
	Message      string      `json:"message,omitempty"`
	SHA256Before string      `json:"sha256_before,omitempty"`
	SHA256After  string      `json:"sha256_after,omitempty"`
	// Restores and Bytes (undo): the ranges the backup puts back.
	Restores []restoreRange `json:"restores,omitempty"`
	Bytes    *int64         `json:"bytes,omitempty"`
}

func plannedRecord(a repair.Action) actionRecord {
	r := actionRecord{Status: "planned", ID: a.ID, Op: string(a.Op), Path: a.Path, Offset: a.Offset, Length: a.Length,
		Reason: a.Reason, Lost: a.Lost, Message: a.Lost.Note, SHA256Before: a.Pre.SHA256}
	switch a.Op {
	case repair.OpTruncateFile, repair.OpResizeFile, repair.OpReplaceFile:
		n := a.NewSize
		r.NewSize = &n
	}
	if r.Lost.MsgIDs == nil {
		r.Lost.MsgIDs = []string{}
	}
	return r
}

// writer is what a writing command plugs into the gate for one target.
type writer struct {
	plan   planner
	verify verifier
	// stage, when the planner sets it, holds the staging dir the plan's
	// actions point at: it is removed after the run unless --plan-out
	// saved a plan that needs it.
	stage interface{ RemoveStage() error }
}

// newWriterCmd completes cmd as a writing command (truncate,
// rebuild-index, harden): one DATADIR argument, the shared writer flags,
// and a RunE that detects the data dir, lets build plug the store's
// planner and verifier in, and runs the gate under the command's name.
func newWriterCmd(env *Env, cmd *cobra.Command, build func(scan.Target, *writerOptions) (*writer, error)) *cobra.Command {
	wo := &writerOptions{}
	cmd.Args = cobra.ExactArgs(1)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		t, err := dataDirTarget(env, args)
		if err != nil {
			return err
		}
		w, err := build(t, wo)
		if err != nil {
			return err
		}
		return runWriter(cmd.Context(), env, cmd.Name(), t, wo, w)
	}
	addWriterFlags(cmd, wo)
	return cmd
}

// runWriter is the plan/apply gate shared by truncate, rebuild-index and
// harden: dry run prints the plan (exit 1 when it has actions); --apply
// refuses on a live broker, asks once on a TTY or needs --yes, checks the
// plan's preconditions, backs up, writes, re-verifies.
func runWriter(ctx context.Context, env *Env, name string, t scan.Target, wo *writerOptions, w *writer) error {
	defer func() {
		if w.stage != nil && wo.PlanOut == "" {
			_ = w.stage.RemoveStage()
		}
	}()
	wo.PlanOut = env.Config.GetString("plan-out")
	wo.BackupDir = env.Config.GetString("backup-dir")
	wo.MaxBytes = env.Config.GetInt64("max-truncate-bytes")
	if wo.PlanFile != "" && !wo.Apply {
		return usagef(errors.New("--plan needs --apply (a saved plan is only ever applied)"))
	}
	if err := checkOutputs(env, t, writerOutputs...); err != nil {
		return err
	}
	if err := useTempDir(env, t); err != nil {
		return err
	}
	var p *repair.Plan
	if wo.PlanFile != "" {
		var err error
		if p, err = repair.LoadPlan(wo.PlanFile); err != nil {
			return usagef(fmt.Errorf("--plan: %w", err))
		}
	}
	dry := !wo.Apply
	run := report.Run{Command: name, DataDir: t.Root, Store: t.Store, Layout: map[string]any{"target": t.Kind},
		DetectedFrom: t.Evidence, DryRun: &dry}
	// An apply holds the writer lock from before anything is checked until
	// the re-verify is done: a second writer refuses at once, naming it.
	var lock *repair.WriterLock
	var lockErr error
	if wo.Apply {
		lock, lockErr = repair.LockDataDir(lockRoot(t), fmt.Sprintf("storectl %s --apply %s", name, t.Root))
		defer lock.Release()
	}
	lv := liveCheck(env, &run, t)
	s, err := env.startSession(run)
	if err != nil {
		return err
	}
	if lockErr != nil {
		s.errors = append(s.errors, lockErr.Error())
		if errors.Is(lockErr, repair.ErrLocked) {
			return s.finish(exitRefused)
		}
		s.incomplete = true
		return s.finish(exitIncomplete)
	}
	// A saved plan changes only the data dir it was made for.
	if p != nil {
		if err := p.CheckDataDir(t.Root); err != nil {
			s.errors = append(s.errors, "--plan "+wo.PlanFile+": "+err.Error()+"; nothing was written")
			return s.finish(exitRefused)
		}
	}
	// Symlinked store files, FIFOs and devices: findings, and no writer
	// touches such a data dir (dry runs included: the plan would pin bytes
	// behind a link).
	block, err := s.blockingOdd(ctx, t)
	if err != nil {
		s.incomplete = true
		s.errors = append(s.errors, "checking the data dir's tree: "+err.Error())
		return s.finish(exitIncomplete)
	}
	if len(block) > 0 {
		s.errors = append(s.errors, fmt.Sprintf("the data dir holds %d symlink(s) or special file(s) (%s): writers refuse it; replace each link by the file it points at (or point the broker at the real path) and remove the special files; nothing was written",
			len(block), strings.Join(firstN(block, 5), ", ")))
		return s.finish(exitRefused)
	}
	if why := lv.refusal(wo.Force); wo.Apply && why != "" {
		s.errors = append(s.errors, why)
		return s.finish(exitRefused)
	}
	if p == nil {
		var scanned *scan.Result
		var extra map[string]any
		p, scanned, extra, err = w.plan(ctx)
		var ue *usageError
		if errors.As(err, &ue) {
			s.errors = append(s.errors, err.Error())
			return s.finish(exitUsage)
		}
		if err != nil {
			s.incomplete = true
			s.errors = append(s.errors, err.Error())
			return s.finish(exitIncomplete)
		}
		if dry && scanned != nil { // an apply reports the re-verify instead
			if err := s.result(scanned); err != nil {
				return err
			}
		}
		for k, v := range extra {
			if s.extra == nil {
				s.extra = map[string]any{}
			}
			s.extra[k] = v
		}
	}
	// A report may say the plan drops data only this node holds: applying
	// it needs --force (RabbitMQ quorum WAL cuts of single-member queues).
	for _, v := range s.extra {
		if fr, ok := v.(interface{ ForceReason() string }); ok && wo.Apply && !wo.Force && fr.ForceReason() != "" {
			s.errors = append(s.errors, fr.ForceReason())
			return s.finish(exitRefused)
		}
	}
	if wo.PlanOut != "" {
		if err := p.Save(wo.PlanOut); err != nil {
			return usagef(fmt.Errorf("--plan-out: %w", err))
		}
	}
	if dry {
		for _, a := range p.Actions {
			if err := s.action(plannedRecord(a)); err != nil {
				return err
			}
		}
		if len(p.Actions) > 0 {
			s.verdict = "dry run: nothing written; the plan has actions (re-run with --apply)"
			return s.finish(exitFindings)
		}
		s.verdict = "dry run: nothing to do"
		return s.finish(exitOK)
	}
	if len(p.Actions) == 0 {
		s.verdict = "nothing to do"
		return s.finish(exitOK)
	}
	if !wo.Yes {
		if !env.Streams.InTTY {
			s.errors = append(s.errors, "--apply on a non-terminal needs --yes; nothing was written")
			return s.finish(exitRefused)
		}
		printPlan(env.Streams.ErrOut, p)
		if !confirm(env, fmt.Sprintf("Apply %d action(s) to %s (backup first)? [y/N] ", len(p.Actions), report.Escape(p.DataDir))) {
			s.errors = append(s.errors, "not confirmed; nothing was written")
			return s.finish(exitRefused)
		}
	}
	rep, err := repair.Apply(ctx, p, repair.ApplyOptions{BackupDir: wo.BackupDir, MaxRemoveBytes: wo.MaxBytes, DataDir: t.Root, Faults: env.faults()})
	applied := err == nil
	s.applied = &applied
	if rep != nil {
		if s.extra == nil {
			s.extra = map[string]any{}
		}
		s.extra["backup_dir"] = rep.BackupDir
		s.extra["write_steps"] = rep.Steps
		s.backupDir = rep.BackupDir
		if len(rep.RolledBack) > 0 {
			s.extra["rolled_back"] = rep.RolledBack
		}
		if len(rep.StillChanged) > 0 {
			s.extra["still_changed"] = rep.StillChanged
			s.extra["rollback_errors"] = rep.RollbackErrors
		}
		if len(rep.Warnings) > 0 {
			s.extra["apply_warnings"] = rep.Warnings
		}
		if err != nil && errors.Is(err, repair.ErrApplyFailed) {
			s.verdict = applyFailedVerdict(rep)
		}
		byID := map[string]repair.Action{}
		for _, a := range p.Actions {
			byID[a.ID] = a
		}
		for _, r := range rep.Actions {
			rec := plannedRecord(byID[r.ID])
			rec.Status, rec.SHA256Before, rec.SHA256After = r.Status, r.SHA256Before, r.SHA256After
			if err := s.action(rec); err != nil {
				return err
			}
		}
	}
	if err != nil {
		return s.failRepair(err)
	}
	// Re-verify: the findings after the apply are the report's findings.
	if w.verify != nil {
		after, err := w.verify(ctx)
		if err != nil {
			s.incomplete = true
			s.errors = append(s.errors, "re-verify: "+err.Error())
			return s.finish(exitIncomplete)
		}
		s.resetCounts()
		if err := s.result(after); err != nil {
			return err
		}
	}
	code := s.code()
	if code == exitOK {
		s.verdict = "applied and re-verified clean"
	} else {
		s.verdict = "applied; re-verify still finds problems"
	}
	return s.finish(code)
}

// confirm asks once on stderr and reads one line from stdin.
func confirm(env *Env, prompt string) bool {
	fmt.Fprint(env.Streams.ErrOut, prompt)
	line, _ := bufio.NewReader(env.Streams.In).ReadString('\n')
	a := strings.ToLower(strings.TrimSpace(line))
	return a == "y" || a == "yes"
}

// dataDirTarget detects the data dir a writing command (or salvage)
// works on: the whole data dir, not a single file (needDataDir).
func dataDirTarget(env *Env, args []string) (scan.Target, error) {
	ts, err := detectAll(env, args, env.Config.GetString("store"))
	if err != nil {
		return scan.Target{}, err
	}
	return ts[0], needDataDir(ts[0])
}

// rabbitPlan adapts a RabbitMQ planner to the gate: a data dir without a
// vhost is a usage error; the report goes into the summary under key;
// keep, when set, receives the report (e.g. to remove a stage later).
func rabbitPlan[R any](env *Env, t scan.Target, key string, fn func(context.Context, rabbitscan.Config) (*repair.Plan, R, error), keep func(R)) planner {
	return func(ctx context.Context) (*repair.Plan, *scan.Result, map[string]any, error) {
		p, rep, err := fn(ctx, rabbitConfig(env, t))
		if keep != nil {
			keep(rep) // also on failure: a stage made before it is removed
		}
		if errors.Is(err, rabbitrepair.ErrNoVHost) {
			return nil, nil, nil, usagef(err)
		}
		if err != nil {
			return nil, nil, nil, err
		}
		var scanned *scan.Result
		if sr, ok := any(rep).(interface{ Scanned() *scan.Result }); ok {
			scanned = sr.Scanned()
		}
		return p, scanned, map[string]any{key: rep}, nil
	}
}

// rabbitVerifier re-verifies a RabbitMQ data dir after an apply.
func rabbitVerifier(env *Env, t scan.Target) verifier {
	return func(ctx context.Context) (*scan.Result, error) {
		return rabbitTarget(ctx, env, t, scan.Options{Jobs: env.Config.GetInt("jobs")}, rabbitscan.Verify)
	}
}

// applyFailedVerdict says what a failed apply left, as its report shows
// it path by path: rolled back, still changed, or never changed.
func applyFailedVerdict(rep *repair.ApplyReport) string {
	switch {
	case len(rep.StillChanged) > 0:
		return fmt.Sprintf("apply failed; ROLLBACK INCOMPLETE: %d path(s) still changed (%s), %d restored; run storectl undo %s --apply once the cause is fixed",
			len(rep.StillChanged), strings.Join(firstN(rep.StillChanged, 5), ", "), len(rep.RolledBack), rep.BackupDir)
	case len(rep.RolledBack) > 0:
		return fmt.Sprintf("apply failed and was rolled back: %d path(s) restored from %s, the data dir is as before", len(rep.RolledBack), rep.BackupDir)
	}
	return "apply failed before it changed the data dir; nothing to roll back"
}

// failRepair ends the report of an apply or undo that returned err with
// the contract's exit code: a bad backup dir or plan is usage (2), a
// moved file or a limit is a refusal (4), a rolled-back failure is 5,
// anything else is incomplete (3).
func (s *session) failRepair(err error) error {
	s.errors = append(s.errors, err.Error())
	switch {
	case errors.Is(err, repair.ErrBackupDir), errors.Is(err, repair.ErrInvalidPlan):
		return s.finish(exitUsage)
	case errors.Is(err, repair.ErrStale), errors.Is(err, repair.ErrLimit), errors.Is(err, repair.ErrWrongDataDir), errors.Is(err, repair.ErrLocked),
		errors.Is(err, repair.ErrBadBackup):
		return s.finish(exitRefused)
	case errors.Is(err, repair.ErrApplyFailed):
		return s.finish(exitApplyFailed)
	}
	return s.finish(exitIncomplete)
}
