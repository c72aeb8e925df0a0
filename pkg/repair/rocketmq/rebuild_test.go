package rocketmq

import (
	"bytes"
	"context"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/storectl/storectl/internal/testutil"
	rmq "github.com/storectl/storectl/pkg/format/rocketmq"
	"github.com/storectl/storectl/pkg/repair"
)

// The fixtures' broker ran with mappedFileSizeConsumeQueue=1000,
// maxHashSlotNum=100, maxIndexNum=400 (testdata/rocketmq/README.md): what
// its broker.conf would say, passed where the files are gone.
const (
	fxCQSize       = 1000
	fxIndexSlots   = 100
	fxIndexEntries = 400
)

var cleanFixtures = []string{"rmq497-a-clean", "rmq533-a-clean"}

// TestRebuildConsumeQueueFromScratch deletes consumequeue/, rebuilds it
// through a plan applied by repair.Apply alone (it creates the dirs), and
// requires every consume queue file to be byte-identical to the one the
// broker wrote, the same dirs with the same modes, and nothing more; undo
// then gives back the store without consumequeue/.
func TestRebuildConsumeQueueFromScratch(t *testing.T) {
	for _, fx := range cleanFixtures {
		t.Run(fx, func(t *testing.T) {
			store := rbFixture(t, fx)
			orig := rbFiles(t, store, "consumequeue")
			before := testutil.TreeHashDirs(t, store)
			if err := os.RemoveAll(filepath.Join(store, "consumequeue")); err != nil {
				t.Fatal(err)
			}
			deleted := testutil.TreeHashDirs(t, store)
			cfg := RebuildConfig{DataDir: store, CQFileSize: fxCQSize}
			p, rep := rbTestPlan(t, cfg)
			if rep.CQFileSizeFrom != "config" || rep.CQFileSize != fxCQSize {
				t.Fatalf("cq size %d from %s", rep.CQFileSize, rep.CQFileSizeFrom)
			}
			for _, a := range p.Actions {
				if a.Op != repair.OpReplaceFile || filepath.Dir(filepath.Dir(filepath.Dir(a.Path))) != "consumequeue" {
					t.Errorf("unexpected action %s %s (index and checkpoint are intact)", a.Op, a.Path)
				}
			}
			if len(p.Actions) != len(orig) {
				t.Errorf("%d actions for %d broker CQ files", len(p.Actions), len(orig))
			}
			bdir := rbApply(t, cfg, p, rep)
			got := rbFiles(t, store, "consumequeue")
			units := 0
			for _, rel := range slices.Sorted(maps.Keys(orig)) {
				if !bytes.Equal(got[rel], orig[rel]) {
					t.Errorf("%s differs from the broker's file", rel)
				}
				for _, u := range rbUnits(orig[rel]) {
					if !u.IsZero() {
						units++
					}
				}
			}
			for rel := range got {
				if _, ok := orig[rel]; !ok {
					t.Errorf("rebuild created %s, which the broker did not", rel)
				}
			}
			testutil.SameTree(t, before, testutil.TreeHashDirs(t, store))
			if _, err := repair.Undo(context.Background(), bdir, repair.UndoOptions{Apply: true}); err != nil {
				t.Fatal(err)
			}
			testutil.SameTree(t, deleted, testutil.TreeHashDirs(t, store))
			t.Logf("%d CQ files, %d units byte-identical to the broker's; dirs and modes equal; undo removed them all", len(orig), units)
		})
	}
}

// TestRebuildIndexFromScratch deletes index/, rebuilds it and requires
// the same number of index files with the same header and bytes as the
// broker's, in name order. The names differ: the broker names a file by
// its creation wall-clock time, the rebuild by the creating record's store
// time, so the names are compared by order only.
func TestRebuildIndexFromScratch(t *testing.T) {
	for _, fx := range cleanFixtures {
		t.Run(fx, func(t *testing.T) {
			store := rbFixture(t, fx)
			orig := rbFiles(t, store, "index")
			if err := os.RemoveAll(filepath.Join(store, "index")); err != nil {
				t.Fatal(err)
			}
			cfg := RebuildConfig{DataDir: store, IndexSlots: fxIndexSlots, IndexEntries: fxIndexEntries}
			p, rep := rbTestPlan(t, cfg)
			if len(p.Actions) != len(orig) {
				t.Errorf("%d actions for %d broker index files: %+v", len(p.Actions), len(orig), p.Actions)
			}
			rbApply(t, cfg, p, rep)
			got := rbFiles(t, store, "index")
			on, gn := slices.Sorted(maps.Keys(orig)), slices.Sorted(maps.Keys(got))
			if len(on) != len(gn) {
				t.Fatalf("%d index files, broker wrote %d", len(gn), len(on))
			}
			for i := range on {
				oh, _ := rmq.DecodeIndexHeader(orig[on[i]], 0)
				gh, _ := rmq.DecodeIndexHeader(got[gn[i]], 0)
				if oh != gh {
					t.Errorf("%s header %+v, broker's %s %+v", gn[i], gh, on[i], oh)
				}
				if !bytes.Equal(orig[on[i]], got[gn[i]]) {
					t.Errorf("%s bytes differ from the broker's %s", gn[i], on[i])
				}
				t.Logf("rebuilt %s == broker %s: %d entries, %d slots used", gn[i], on[i], gh.IndexCount-1, gh.HashSlotCount)
			}
		})
	}
}

// TestRebuildDryRunClean: an untouched store already matches, so the plan
// is empty, and planning changes nothing and leaves no stage behind.
func TestRebuildDryRunClean(t *testing.T) {
	for _, fx := range cleanFixtures {
		t.Run(fx, func(t *testing.T) {
			store := rbFixture(t, fx)
			before := testutil.TreeHash(t, store)
			p, rep, err := PlanRebuildIndex(context.Background(), RebuildConfig{DataDir: store})
			if err != nil {
				t.Fatal(err)
			}
			if len(p.Actions) != 0 || !rep.PlanEmpty() {
				t.Fatalf("%d actions on a clean store: %+v\nreport %+v", len(p.Actions), p.Actions, rep)
			}
			if rep.CQFileSize != fxCQSize || rep.IndexLayout != (rmq.IndexLayout{Slots: fxIndexSlots, Entries: fxIndexEntries}) {
				t.Errorf("geometry inferred as %d / %+v", rep.CQFileSize, rep.IndexLayout)
			}
			testutil.SameTree(t, before, testutil.TreeHash(t, store))
			rbNoStageLeft(t, store)
			t.Logf("%d records up to recovery end %d: 0 actions", rep.Records, rep.RecoveryEnd)
		})
	}
}

// TestRebuildDryRunPrintOnly: a dry run that keeps no stage (no --apply,
// no --plan-out) plans the same actions as one that does, but as a
// print-only plan whose staged sources are not hashed: it cannot be saved
// or applied, and its stage is gone when it returns.
func TestRebuildDryRunPrintOnly(t *testing.T) {
	store := rbFixture(t, cleanFixtures[0])
	for _, sub := range []string{"index", "consumequeue"} {
		if err := os.RemoveAll(filepath.Join(store, sub)); err != nil {
			t.Fatal(err)
		}
	}
	cfg := RebuildConfig{DataDir: store, CQFileSize: fxCQSize, IndexSlots: fxIndexSlots, IndexEntries: fxIndexEntries}
	dry, _, err := PlanRebuildIndex(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	rbNoStageLeft(t, store)
	if err := dry.Save(filepath.Join(t.TempDir(), "plan.json")); !errors.Is(err, repair.ErrPrintOnly) {
		t.Errorf("Save of the dry-run plan: %v, want ErrPrintOnly", err)
	}
	kept, _ := rbTestPlan(t, cfg)
	if len(dry.Actions) != len(kept.Actions) || len(dry.Actions) == 0 {
		t.Fatalf("%d actions without a stage kept, %d with", len(dry.Actions), len(kept.Actions))
	}
	sources := 0
	for i, d := range dry.Actions {
		k := kept.Actions[i]
		if d.Source != "" {
			sources++
			if d.SourceSHA256 != "" || k.SourceSHA256 == "" {
				t.Errorf("%s: source sha %q without a stage, %q with", d.Path, d.SourceSHA256, k.SourceSHA256)
			}
		}
		d.Source, d.SourceSHA256, k.Source, k.SourceSHA256 = "", "", "", ""
		if !reflect.DeepEqual(d, k) {
			t.Errorf("action %d differs:\n%+v\n%+v", i, d, k)
		}
	}
	if sources == 0 {
		t.Fatal("no action has a staged source")
	}
	t.Logf("%d actions, %d with staged sources, equal but for the sources' hashes", len(dry.Actions), sources)
}

// TestRebuildStagesWhatDiffers: with one consume queue unit changed, a
// plan only printed stages that one rebuilt file (its action's source),
// while a plan kept for --apply stages every rebuilt file (VerifyStaged
// checks the stage as a whole store). Both plan the same single action.
func TestRebuildStagesWhatDiffers(t *testing.T) {
	store := rbFixture(t, cleanFixtures[1])
	cq := rbFiles(t, store, "consumequeue")
	names := slices.Sorted(maps.Keys(cq))
	bad := names[len(names)/2]
	b := cq[bad]
	b[8] ^= 0x40 // unit 0's size
	if err := os.WriteFile(filepath.Join(store, filepath.FromSlash(bad)), b, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, keep := range []bool{false, true} {
		cfg := RebuildConfig{DataDir: store, CQFileSize: fxCQSize, IndexSlots: fxIndexSlots, IndexEntries: fxIndexEntries,
			KeepStage: keep, SkipIndex: true, Location: time.Local, Now: time.Now(), StageDir: filepath.Join(t.TempDir(), "stage")}
		ex, err := rbListExisting(store)
		if err != nil {
			t.Fatal(err)
		}
		rep := &RebuildReport{DataDir: store}
		if err := rbGeometry(&cfg, ex, rep); err != nil {
			t.Fatal(err)
		}
		stage, err := rbMakeStage(&cfg, rep)
		if err != nil {
			t.Fatal(err)
		}
		plan, err := rbPlan(context.Background(), &cfg, ex, stage, rep)
		if err != nil {
			t.Fatal(err)
		}
		staged := rbFiles(t, stage, "consumequeue")
		var acts []string
		for _, a := range plan.Actions {
			acts = append(acts, filepath.ToSlash(a.Path))
		}
		want := []string{bad}
		if keep {
			want = names
		}
		if got := slices.Sorted(maps.Keys(staged)); !slices.Equal(got, want) {
			t.Errorf("keep %v: staged %v, want %v", keep, got, want)
		}
		if !slices.Equal(acts, []string{bad}) {
			t.Errorf("keep %v: actions on %v, want only %s", keep, acts, bad)
		}
		t.Logf("keep %v: %d of %d consume queue files staged, actions %v", keep, len(staged), len(names), acts)
	}
}
