package repair

import (
	"context"
	"errors"
	"maps"
	"slices"
	"syscall"
	"testing"

	"github.com/storectl/storectl/internal/testutil"
)

// TestDiskFullRollbackTruth runs the combined case (every op, dirs made
// and removed) with the disk full from step n on (DiskFullAt: every write
// and mkdir fails with ENOSPC, the rollback's too), for every n. Issue 21,
// defect 7: the report claimed a rollback that had not happened, without
// the paths, and the manifest stayed "prepared". Each time, path by path,
// what the report says is what the tree holds (StillChanged: the applied
// bytes; every other path: the original), the statuses agree, the
// journal's state is rolled-back or rollback-incomplete accordingly, and a
// plain Undo with the space back restores the original tree.
func TestDiskFullRollbackTruth(t *testing.T) {
	// The combined case: its files change size, so a rollback that cannot
	// stage a copy cannot finish, and must say so.
	incomplete, inPlace := diskFullEveryStep(t, opCases[len(opCases)-1])
	if incomplete == 0 {
		t.Fatal("no rollback ran out of space")
	}
	// Two files overwritten in place: the rollback writes their pre-images
	// back where they were, which needs no space, and finishes.
	ranges := opCase{name: "two range files", build: func(t *testing.T, _ string) []Action {
		return []Action{
			{Op: OpZeroRange, Path: small, Offset: 10, Length: 20},
			{Op: OpWriteRange, Path: cl, Offset: 100, Length: 5, Data: []byte("HELLO")},
		}
	}}
	incomplete, inPlace = diskFullEveryStep(t, ranges)
	if incomplete != 0 || inPlace == 0 {
		t.Fatalf("same-size files: %d incomplete rollbacks, %d restored in place; want 0 and some", incomplete, inPlace)
	}
}

// diskFullEveryStep is TestDiskFullRollbackTruth for one case.
func diskFullEveryStep(t *testing.T, c opCase) (incomplete, inPlace int) {
	data := makeTreeFor(t, c)
	orig := readTree(t, data)
	rep, err := Apply(context.Background(), buildPlan(t, data, c, SnapshotOptions{}), ApplyOptions{BackupDir: backupDir(data), Faults: Faults{skipSync: true}})
	if err != nil {
		t.Fatal(err)
	}
	applied := readTree(t, data)
	steps := rep.Steps
	for n := 1; n <= steps; n++ {
		data := makeTreeFor(t, c)
		before := testutil.TreeHashDirs(t, data)
		rep, err := Apply(context.Background(), buildPlan(t, data, c, SnapshotOptions{}), ApplyOptions{BackupDir: backupDir(data), Faults: Faults{Injector: DiskFullAt(n), skipSync: true}})
		now := readTree(t, data)
		if err == nil {
			if !maps.EqualFunc(now, applied, func(a, b []byte) bool { return string(a) == string(b) }) {
				t.Fatalf("step %d: Apply succeeded but the tree is not the applied one", n)
			}
			continue
		}
		if errors.Is(err, ErrBackupDir) { // the backup dir itself could not be made
			testutil.SameTree(t, before, testutil.TreeHashDirs(t, data))
			continue
		}
		if !errors.Is(err, syscall.ENOSPC) {
			t.Fatalf("step %d: %v", n, err)
		}
		still := map[string]bool{}
		for _, p := range rep.StillChanged {
			still[p] = true
		}
		for p := range keysOf(orig, applied, now) {
			want := orig[p]
			if still[p] {
				want = applied[p]
			}
			if string(now[p]) != string(want) || (want == nil) != (now[p] == nil) {
				t.Fatalf("step %d: %s: the report says %v (still changed), the tree disagrees", n, p, still[p])
			}
		}
		for _, a := range rep.Actions {
			if (a.Status == StatusApplied) != still[a.Path] && a.Op != OpRemoveDir {
				t.Fatalf("step %d: action %s on %s is %s, still changed %v", n, a.ID, a.Path, a.Status, still[a.Path])
			}
		}
		js, _ := ReadJournal(backupDir(data))
		state := journalState(js)
		if len(rep.StillChanged) > 0 {
			incomplete++
			if state != StateRollbackIncomplete || !errors.Is(err, ErrApplyFailed) {
				t.Fatalf("step %d: still changed %v, journal state %q, err %v", n, rep.StillChanged, state, err)
			}
		} else if len(rep.RolledBack) > 0 && state != StateRolledBack {
			t.Fatalf("step %d: rolled back %v, journal state %q", n, rep.RolledBack, state)
		}
		for _, e := range js {
			if e.Op == JournalInPlace {
				inPlace++
			}
		}
		if len(js) > 0 || len(rep.RolledBack) > 0 {
			if _, err := Undo(context.Background(), backupDir(data), UndoOptions{Apply: true, Faults: Faults{skipSync: true}}); err != nil {
				t.Fatalf("step %d: plain undo with the space back: %v", n, err)
			}
		}
		testutil.SameTree(t, before, testutil.TreeHashDirs(t, data))
	}
	t.Logf("%s: disk full from each of %d steps: %d rollbacks could not finish and said so, %d files restored in place", c.name, steps, incomplete, inPlace)
	return incomplete, inPlace
}

func keysOf(ms ...map[string][]byte) map[string]bool {
	out := map[string]bool{}
	for _, m := range ms {
		for _, k := range slices.Collect(maps.Keys(m)) {
			out[k] = true
		}
	}
	return out
}
