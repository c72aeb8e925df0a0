package repair

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/storectl/storectl/internal/testutil"
)

// TestApplyFaultEveryStep fails Apply at each counted write step in turn:
// every run must return ErrApplyFailed and leave the data dir byte-identical
// with the same dirs and dir modes (no staging file or created dir left,
// removed dirs back, mtimes back so the plan still checks), and the run
// after the last step must succeed. The steps after the journal records
// the apply (the rewrite of manifest.json with the after states) are the
// exception: the apply stands, with a warning, and undoes without Force
// from the journal.
func TestApplyFaultEveryStep(t *testing.T) {
	for _, c := range opCases {
		switch c.name { // their actions are all in the last case; this fs is slow at open/mkdir
		case "replace-file creates nested dirs", "remove-dir after its files":
			continue
		}
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			data := makeTreeFor(t, c)
			rep, err := Apply(context.Background(), buildPlan(t, data, c, SnapshotOptions{}), ApplyOptions{BackupDir: backupDir(data)})
			if err != nil {
				t.Fatal(err)
			}
			steps := rep.Steps
			if steps < 8 { // mkdirs, pre-image, manifest, stage, fsyncs, rename, manifest
				t.Fatalf("only %d steps counted", steps)
			}
			sawDataWrite := false
			for n := 1; n <= steps; n++ {
				data := makeTreeFor(t, c)
				before := testutil.TreeHashDirs(t, data)
				p := buildPlan(t, data, c, SnapshotOptions{})
				rep, err := Apply(context.Background(), p, ApplyOptions{BackupDir: backupDir(data), Faults: Faults{FailAtWrite: n, skipSync: true}})
				if err == nil && len(rep.Warnings) > 0 {
					if _, err := Undo(context.Background(), rep.BackupDir, UndoOptions{Apply: true, Faults: Faults{skipSync: true}}); err != nil {
						t.Fatalf("step %d: manifest not rewritten, undo from the journal: %v", n, err)
					}
					testutil.SameTree(t, before, testutil.TreeHashDirs(t, data))
					continue
				}
				if !errors.Is(err, ErrApplyFailed) || !errors.Is(err, ErrInjected) {
					t.Fatalf("step %d/%d: err %v, want ErrApplyFailed+ErrInjected", n, steps, err)
				}
				testutil.SameTree(t, before, testutil.TreeHashDirs(t, data))
				if err := p.Check(data); err != nil {
					t.Fatalf("step %d: plan no longer checks after rollback: %v", n, err)
				}
				if len(rep.RollbackErrors) > 0 {
					t.Fatalf("step %d: rollback errors %v", n, rep.RollbackErrors)
				}
				if len(rep.RolledBack) > 0 {
					sawDataWrite = true
					for _, a := range rep.Actions {
						if a.Status == StatusApplied {
							t.Fatalf("step %d: action %s reported applied after rollback", n, a.ID)
						}
					}
				}
			}
			t.Logf("%d apply steps, each one faulted", steps)
			if !sawDataWrite {
				t.Fatalf("no fault hit after a data file had changed: rollback never exercised")
			}
			data = makeTreeFor(t, c)
			if _, err := Apply(context.Background(), buildPlan(t, data, c, SnapshotOptions{}), ApplyOptions{BackupDir: backupDir(data), Faults: Faults{FailAtWrite: steps + 1, skipSync: true}}); err != nil {
				t.Fatalf("fault after the last step: %v", err)
			}
		})
	}
}

// TestUndoFaultEveryStep interrupts Undo at each step; a second, unfaulted
// Undo must still restore every byte, dir and dir mode.
func TestUndoFaultEveryStep(t *testing.T) {
	for _, c := range opCases {
		switch c.name { // the combined case covers the other ops; this fs is slow at open/mkdir
		case "several files, dirs and ops", "write-range staged across chunks", "remove-file", "replace-file inline", "resize-file shrink":
		default:
			continue
		}
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			steps := 0
			for n := 1; ; n++ {
				data := makeTreeFor(t, c)
				orig := testutil.TreeHashDirs(t, data)
				rep, err := Apply(context.Background(), buildPlan(t, data, c, SnapshotOptions{}), ApplyOptions{BackupDir: backupDir(data), Faults: Faults{skipSync: true}})
				if err != nil {
					t.Fatal(err)
				}
				urep, err := Undo(context.Background(), rep.BackupDir, UndoOptions{Apply: true, Faults: Faults{FailAtWrite: n, skipSync: true}})
				if err == nil {
					steps = urep.Steps
					testutil.SameTree(t, orig, testutil.TreeHashDirs(t, data))
					break
				}
				if !errors.Is(err, ErrApplyFailed) || !errors.Is(err, ErrInjected) {
					t.Fatalf("step %d: %v", n, err)
				}
				if _, err := Undo(context.Background(), rep.BackupDir, UndoOptions{Apply: true, Faults: Faults{skipSync: true}}); err != nil {
					t.Fatalf("step %d: re-run undo: %v", n, err)
				}
				testutil.SameTree(t, orig, testutil.TreeHashDirs(t, data))
				if n > 1000 {
					t.Fatal("undo never succeeded")
				}
			}
			t.Logf("%d undo steps, each one faulted", steps)
			if steps < 3 {
				t.Fatalf("undo took only %d steps", steps)
			}
		})
	}
}

// TestApplyCancelled: a cancelled context writes nothing to the data dir.
func TestApplyCancelled(t *testing.T) {
	data := makeTree(t)
	before := testutil.TreeHashDirs(t, data)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := Apply(ctx, buildPlan(t, data, opCases[len(opCases)-1], SnapshotOptions{}), ApplyOptions{BackupDir: backupDir(data)})
	if !errors.Is(err, ErrApplyFailed) || !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v", err)
	}
	testutil.SameTree(t, before, testutil.TreeHashDirs(t, data))
	if _, err := os.Stat(filepath.Join(backupDir(data), ManifestName)); err == nil {
		t.Fatal("backup left behind although nothing was changed")
	}
}

// TestCrashThenUndo kills Apply (no rollback) at every step and leaves a
// staging file behind, as a crash would; Undo from the backup, without
// Force (issue 21: the journal says which steps ran), must then give back
// the original tree, byte for byte.
func TestCrashThenUndo(t *testing.T) {
	c := opCases[len(opCases)-1] // several files, dirs and ops
	data := makeTreeFor(t, c)
	rep, err := Apply(context.Background(), buildPlan(t, data, c, SnapshotOptions{}), ApplyOptions{BackupDir: backupDir(data), Faults: Faults{skipSync: true}})
	if err != nil {
		t.Fatal(err)
	}
	recovered, inDir := 0, 0
	for n := 1; n <= rep.Steps; n++ {
		data := makeTreeFor(t, c)
		orig := testutil.TreeHashDirs(t, data)
		arep, err := Apply(context.Background(), buildPlan(t, data, c, SnapshotOptions{}), ApplyOptions{BackupDir: backupDir(data), Faults: Faults{FailAtWrite: n, skipSync: true, noRollback: true}})
		if err == nil && len(arep.Warnings) == 0 || err != nil && !errors.Is(err, ErrApplyFailed) { // nil: the manifest rewrite after the journal's "applied"
			t.Fatalf("step %d: %v", n, err)
		}
		os.WriteFile(filepath.Join(data, StagePrefix+small), []byte("half-written"), 0o600)
		stages := 1
		// A crash while writing a new file leaves its stage in the dir the
		// apply created; undo must remove both.
		if err := os.WriteFile(stagePath(filepath.Join(data, cqB0)), []byte("half"), 0o600); err == nil {
			stages++
		}
		m, err := ReadManifest(backupDir(data))
		if err != nil { // died while writing the backup: the data dir is untouched
			if _, err := os.Stat(filepath.Join(backupDir(data), "pre")); err == nil {
				urep, err := Undo(context.Background(), backupDir(data), UndoOptions{Apply: true, Faults: Faults{skipSync: true}})
				if err != nil || !urep.Partial {
					t.Fatalf("step %d: undo of a backup without manifest: %+v, %v", n, urep, err)
				}
			}
			os.Remove(filepath.Join(data, StagePrefix+small))
			os.Remove(stagePath(filepath.Join(data, cqB0)))
			testutil.SameTree(t, orig, testutil.TreeHashDirs(t, data))
			continue
		}
		urep, err := Undo(context.Background(), backupDir(data), UndoOptions{Apply: true, Faults: Faults{skipSync: true}})
		if err != nil {
			t.Fatalf("step %d (state %s): undo: %v", n, m.State, err)
		}
		if len(urep.Stages) != stages {
			t.Fatalf("step %d: leftover stages %v", n, urep.Stages)
		}
		testutil.SameTree(t, orig, testutil.TreeHashDirs(t, data))
		recovered++
		if stages > 1 {
			inDir++
		}
	}
	t.Logf("%d crash points, %d recovered by undo --force (%d with a stage in a dir the apply created), the rest died before the manifest", rep.Steps, recovered, inDir)
	if recovered == 0 {
		t.Fatal("no crash left a manifest to recover from")
	}
}
