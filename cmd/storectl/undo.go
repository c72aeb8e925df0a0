package main

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/storectl/storectl/pkg/repair"
	"github.com/storectl/storectl/pkg/report"
	"github.com/storectl/storectl/pkg/scan"
)

func newUndoCmd(env *Env) *cobra.Command {
	wo := &writerOptions{}
	cmd := &cobra.Command{
		Use:   "undo BACKUP_DIR",
		Short: "Put back every byte an --apply changed, from its backup dir",
		Long: `undo reads the manifest.json of a backup made by truncate, rebuild-index or
harden --apply and restores every changed range, removed and replaced file,
byte for byte (each restored file is checked against its pre-apply SHA-256).
Without --apply it only says what it would restore.

` + exitCodesHelp,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runUndo(cmd.Context(), env, args[0], wo)
		},
	}
	f := cmd.Flags()
	f.BoolVar(&wo.Apply, "apply", false, "restore the files; without it only the restore plan is printed")
	f.BoolVar(&wo.Yes, "yes", false, "do not ask for confirmation (required with --apply when stdin is not a terminal)")
	f.BoolVar(&wo.Force, "force", false, "restore files that changed after the apply, and ignore a live broker")
	f.String("data-dir", "", "the data dir, if it moved since the apply")
	return cmd
}

func runUndo(ctx context.Context, env *Env, backup string, wo *writerOptions) error {
	m, err := repair.ReadManifest(backup)
	if errors.Is(err, os.ErrNotExist) {
		// An apply killed while it wrote the backup leaves no manifest,
		// and has changed nothing yet (repair.UndoReport.Partial).
		if rep, uerr := repair.Undo(ctx, backup, repair.UndoOptions{}); uerr == nil && rep.Partial {
			dry := !wo.Apply
			s, err := env.startSession(report.Run{Command: "undo", Args: []string{backup}, DryRun: &dry})
			if err != nil {
				return err
			}
			s.verdict = "nothing to restore: " + backup + " has no manifest.json; if an apply made it, it stopped while it wrote the backup, before it changed the data dir"
			return s.finish(exitOK)
		}
	}
	if err != nil {
		return usagef(fmt.Errorf("%s: not a storectl backup: %w", backup, err))
	}
	dataDir := env.Config.GetString("data-dir")
	if dataDir == "" {
		dataDir = m.DataDir
	}
	dry := !wo.Apply
	run := report.Run{Command: "undo", Args: []string{backup}, DataDir: dataDir, DryRun: &dry}
	t := scan.Target{Root: dataDir, Path: dataDir}
	if dt, err := scan.Detect(dataDir, ""); err == nil {
		t = dt
		run.Store = dt.Store
	}
	var lock *repair.WriterLock
	var lockErr error
	if wo.Apply {
		lock, lockErr = repair.LockDataDir(lockRoot(t), "storectl undo --apply "+backup)
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
	if why := lv.refusal(wo.Force); wo.Apply && why != "" {
		s.errors = append(s.errors, why)
		return s.finish(exitRefused)
	}
	if wo.Apply && !wo.Yes {
		if !env.Streams.InTTY {
			s.errors = append(s.errors, "--apply on a non-terminal needs --yes; nothing was written")
			return s.finish(exitRefused)
		}
		if plan, err := repair.Undo(ctx, backup, repair.UndoOptions{Force: wo.Force, DataDir: env.Config.GetString("data-dir")}); err == nil {
			fmt.Fprintf(env.Streams.ErrOut, "Undo plan for %s (backup %s):\n", report.Escape(dataDir), report.Escape(backup))
			for i, f := range plan.Files {
				r := undoRecord(m, f)
				fmt.Fprintf(env.Streams.ErrOut, "  %d. %s %s: %s\n", i+1, r.Op, report.Escape(r.Path), report.Escape(r.Message))
			}
		}
		if !confirm(env, fmt.Sprintf("Restore %s from %s? [y/N] ", report.Escape(dataDir), report.Escape(backup))) {
			s.errors = append(s.errors, "not confirmed; nothing was written")
			return s.finish(exitRefused)
		}
	}
	rep, err := repair.Undo(ctx, backup, repair.UndoOptions{Apply: wo.Apply, Force: wo.Force, DataDir: env.Config.GetString("data-dir"), Faults: env.faults()})
	pending := 0
	if rep != nil && wo.Apply {
		s.extra = map[string]any{"write_steps": rep.Steps, "state": rep.State}
	}
	if rep != nil {
		for _, f := range rep.Files {
			if f.Action != repair.UndoNothing && !f.Done {
				pending++
			}
			if err := s.action(undoRecord(m, f)); err != nil {
				return err
			}
		}
	}
	if err != nil {
		return s.failRepair(err)
	}
	if dry {
		if pending > 0 {
			s.verdict = "dry run: nothing written; undo would restore files (re-run with --apply)"
			return s.finish(exitFindings)
		}
		s.verdict = "dry run: nothing to restore"
		return s.finish(exitOK)
	}
	s.verdict = "restored"
	return s.finish(exitOK)
}
