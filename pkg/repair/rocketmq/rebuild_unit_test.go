package rocketmq

import (
	"context"
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/storectl/storectl/internal/testutil"
	rmq "github.com/storectl/storectl/pkg/format/rocketmq"
	"github.com/storectl/storectl/pkg/repair"
	scanrmq "github.com/storectl/storectl/pkg/scan/rocketmq"
)

// TestRebuildOneBadUnit overwrites one unit in the middle of a consume
// queue file: the dry run names exactly that unit and plans to replace
// only that file; apply restores the broker's bytes and touches nothing
// else; undo brings back the damaged file byte for byte.
func TestRebuildOneBadUnit(t *testing.T) {
	for _, fx := range cleanFixtures {
		t.Run(fx, func(t *testing.T) {
			store := rbFixture(t, fx)
			clean := testutil.TreeHash(t, store)
			const rel = "consumequeue/TopicA/1/00000000000000001000"
			const unit = 3 // queue offset 53, byte 60 of the file
			p := filepath.Join(store, rel)
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			old, _ := rmq.DecodeCQUnit(b[unit*20:], unit*20)
			binary.BigEndian.PutUint64(b[unit*20:], uint64(old.CommitLogOffset+4)) // points into the record
			if err := os.WriteFile(p, b, 0o644); err != nil {
				t.Fatal(err)
			}
			damaged := testutil.TreeHash(t, store)

			dry, drep, err := PlanRebuildIndex(context.Background(), RebuildConfig{DataDir: store})
			if err != nil {
				t.Fatal(err)
			}
			testutil.SameTree(t, damaged, testutil.TreeHash(t, store))
			rbNoStageLeft(t, store)
			if len(dry.Actions) != 1 || dry.Actions[0].Op != repair.OpReplaceFile || dry.Actions[0].Path != rel {
				t.Fatalf("plan %+v, want one replace-file of %s", dry.Actions, rel)
			}
			var diffs []UnitDiff
			for _, q := range drep.Queues {
				for _, d := range q.Diffs {
					if q.Topic != "TopicA" || q.QueueID != 1 {
						t.Errorf("queue %s/%d reported", q.Topic, q.QueueID)
					}
					diffs = append(diffs, d)
				}
			}
			want := UnitDiff{Kind: UnitChanged, Index: 53, File: rel, Offset: 60,
				Old: rmq.CQUnit{CommitLogOffset: old.CommitLogOffset + 4, Size: old.Size, TagsCode: old.TagsCode}, New: old}
			if len(diffs) != 1 || diffs[0] != want {
				t.Fatalf("diffs %+v, want %+v", diffs, want)
			}

			cfg := RebuildConfig{DataDir: store}
			plan, rep := rbTestPlan(t, cfg)
			bdir := rbApply(t, cfg, plan, rep)
			testutil.SameTree(t, clean, testutil.TreeHash(t, store))
			if _, err := repair.Undo(context.Background(), bdir, repair.UndoOptions{Apply: true}); err != nil {
				t.Fatal(err)
			}
			testutil.SameTree(t, damaged, testutil.TreeHash(t, store))
		})
	}
}

// TestRebuildStaleTail: c-stale holds 13 stale records copied after the
// last real record. With that tail zeroed (what truncate does), the
// rebuilt consume queues equal, unit for unit, those the broker's fixed
// recovery (rocketmq #10017) kept, both when rebuilt over the broker's
// CQs and from an empty consumequeue/ and index/, and Verify finds nothing
// wrong with the consume queues or the index.
func TestRebuildStaleTail(t *testing.T) {
	for _, v := range []string{"rmq497", "rmq533"} {
		t.Run(v, func(t *testing.T) {
			store := rbFixture(t, v+"-c-stale")
			oracle := readRecoverOracle(t, v+"-c-stale.fixed-recovery.recover.jsonl")
			end := oracle.maxPhy
			cl := filepath.Join(store, "commitlog")
			ents, _ := os.ReadDir(cl)
			last := ents[len(ents)-1].Name()
			base, _ := rmq.ParseFileName(last)
			f, err := os.OpenFile(filepath.Join(cl, last), os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			fi, _ := f.Stat()
			if _, err := f.WriteAt(make([]byte, fi.Size()-(end-base)), end-base); err != nil {
				t.Fatal(err)
			}
			f.Close()

			// The shipped CQs were not polluted (the broker skipped the stale
			// records), so a rebuild over them changes no CQ file...
			dry, _, err := PlanRebuildIndex(context.Background(), RebuildConfig{DataDir: store})
			if err != nil {
				t.Fatal(err)
			}
			for _, a := range dry.Actions {
				if strings.HasPrefix(a.Path, "consumequeue") {
					t.Errorf("rebuild over the broker's CQs plans %s %s", a.Op, a.Path)
				}
			}
			// ... and one from nothing must produce them without the stale records.
			for _, sub := range []string{"consumequeue", "index"} {
				if err := os.RemoveAll(filepath.Join(store, sub)); err != nil {
					t.Fatal(err)
				}
			}
			cfg := RebuildConfig{DataDir: store, CQFileSize: fxCQSize, IndexSlots: fxIndexSlots, IndexEntries: fxIndexEntries}
			plan, rep := rbTestPlan(t, cfg)
			if rep.RecoveryEnd != end {
				t.Fatalf("recovery end %d, broker's fixed recovery %d", rep.RecoveryEnd, end)
			}
			rbApply(t, cfg, plan, rep)
			units := 0
			for key, want := range oracle.queues {
				got := readQueue(t, store, key, rep.CQFileSize)
				if len(got) != len(want) {
					t.Errorf("%s: %d units, broker kept %d", key, len(got), len(want))
					continue
				}
				for i := range want {
					if got[i] != want[i] {
						t.Errorf("%s unit %d: %+v, broker %+v", key, i, got[i], want[i])
					}
					units++
				}
			}
			res, err := scanrmq.Verify(context.Background(), scanrmq.VerifyConfig{Config: scanrmq.Config{Root: store}}, scanNoRecords)
			if err != nil {
				t.Fatal(err)
			}
			for _, fd := range res.Findings {
				if strings.HasPrefix(fd.Code, "rocketmq.consumequeue.") || strings.HasPrefix(fd.Code, "rocketmq.index.") {
					t.Errorf("verify after rebuild: %s %s@%d: %s", fd.Code, fd.Path, fd.Offset, fd.Message)
				}
			}
			t.Logf("%d actions; %d units equal to the broker's fixed recovery; verify: %d findings, none on CQ/index", len(plan.Actions), units, len(res.Findings))
		})
	}
}

// TestVerifyStagedCatchesBadStage: a staged unit with a wrong tags code
// must fail VerifyStaged, from both the own cross-check and Verify.
func TestVerifyStagedCatchesBadStage(t *testing.T) {
	store := rbFixture(t, "rmq497-a-clean")
	if err := os.RemoveAll(filepath.Join(store, "consumequeue")); err != nil {
		t.Fatal(err)
	}
	cfg := RebuildConfig{DataDir: store, CQFileSize: fxCQSize}
	_, rep := rbTestPlan(t, cfg)
	p := filepath.Join(rep.StageDir, "consumequeue/TopicB/0/00000000000000000000")
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	b[2*20+19] ^= 1 // unit 2's tagsCode
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	chk, err := VerifyStaged(context.Background(), cfg, rep)
	if err != nil {
		t.Fatal(err)
	}
	own, viaVerify := false, false
	for _, pr := range chk.Problems {
		own = own || strings.Contains(pr, "unit 2: tagsCode")
		viaVerify = viaVerify || strings.HasPrefix(pr, "verify: rocketmq.consumequeue.")
	}
	if !own || !viaVerify {
		t.Fatalf("problems %q: own check %v, Verify %v", chk.Problems, own, viaVerify)
	}
}
