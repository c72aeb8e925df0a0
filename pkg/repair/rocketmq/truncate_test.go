package rocketmq

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/storectl/storectl/internal/testutil"
	rmq "github.com/storectl/storectl/pkg/format/rocketmq"
	"github.com/storectl/storectl/pkg/repair"
	"github.com/storectl/storectl/pkg/scan"
	scanrmq "github.com/storectl/storectl/pkg/scan/rocketmq"
)

// trDamaged are the fixtures whose correct recovery drops data; every
// other fixture must give an empty plan.
var trDamaged = map[string]bool{"rmq497-c-stale": true, "rmq533-c-stale": true, "rmq533-d-torn-crc": true}

// TestTruncateDryRunFixtures plans every RocketMQ fixture: planning
// changes no byte, and only the damaged fixtures get actions.
func TestTruncateDryRunFixtures(t *testing.T) {
	tarballs, err := filepath.Glob(testutil.Testdata("rocketmq", "*.tar.gz"))
	if err != nil || len(tarballs) == 0 {
		t.Fatalf("no fixtures: %v", err)
	}
	seen := 0
	for _, tb := range tarballs {
		ds := strings.TrimSuffix(filepath.Base(tb), ".tar.gz")
		t.Run(ds, func(t *testing.T) {
			t.Parallel()
			store := trStore(t, ds)
			before := testutil.TreeHash(t, store)
			p, rep := trPlan(t, store)
			testutil.SameTree(t, before, testutil.TreeHash(t, store))
			if got := len(p.Actions) > 0; got != trDamaged[ds] {
				t.Fatalf("plan has %d actions, want actions: %v; report %+v", len(p.Actions), trDamaged[ds], rep)
			}
			if trDamaged[ds] && rep.Reason == "" {
				t.Errorf("damaged store but no reason in the report")
			}
		})
		if trDamaged[ds] {
			seen++
		}
	}
	if seen != len(trDamaged) {
		t.Fatalf("found %d of the %d damaged fixtures", seen, len(trDamaged))
	}
}

// TestTruncatePreallocatedKept: b-abnormal's extra all-zero commitlog file
// stays (the broker deletes and re-creates it itself); nothing is planned.
func TestTruncatePreallocatedKept(t *testing.T) {
	store := trStore(t, "rmq533-b-abnormal")
	p, rep := trPlan(t, store)
	end, _ := trRecovered(t, "rmq533-b-abnormal.recover.jsonl")
	if rep.RecoveryEnd != end || len(p.Actions) != 0 {
		t.Fatalf("end %d (oracle %d), %d actions", rep.RecoveryEnd, end, len(p.Actions))
	}
	var kept []string
	for _, f := range rep.CommitLog {
		if f.Decision == TruncateKeep {
			kept = append(kept, f.Path)
		}
	}
	if len(kept) != 1 || kept[0] != "commitlog/00000000000001048576" {
		t.Fatalf("kept %v, want the pre-allocated commitlog/00000000000001048576", kept)
	}
}

type trInject struct {
	File       string `json:"file"`
	CopiedMsgs int64  `json:"copied_msgs"`
}

// TestTruncateCStale: the plan zeroes the stale records past the fixed
// recovery's end; after Apply the tail is zero, no size changed, the
// consume queues equal the fixed recovery's, a fresh scan is clean, and
// Undo restores every byte.
func TestTruncateCStale(t *testing.T) {
	for _, v := range []string{"rmq497", "rmq533"} {
		t.Run(v, func(t *testing.T) {
			t.Parallel()
			ds := v + "-c-stale"
			end, cqs := trRecovered(t, ds+".fixed-recovery.recover.jsonl")
			var inj trInject
			b, err := os.ReadFile(testutil.Testdata("rocketmq", ds+".inject.json"))
			if err == nil {
				err = json.Unmarshal(b, &inj)
			}
			if err != nil {
				t.Fatal(err)
			}
			store := trStore(t, ds)
			orig := testutil.TreeHash(t, store)
			sizes := trSizes(t, store)
			p, rep := trPlan(t, store)
			if rep.RecoveryEnd != end {
				t.Fatalf("recovery end %d, fixed recovery %d", rep.RecoveryEnd, end)
			}
			if len(p.Actions) != 1 || p.Actions[0].Op != repair.OpZeroRange || p.Actions[0].Reason != scanrmq.CodeStaleRecord {
				t.Fatalf("actions %+v, want one zero-range for stale records", p.Actions)
			}
			if lost := p.Actions[0].Lost; lost.Records != inj.CopiedMsgs || int64(len(lost.MsgIDs)) != inj.CopiedMsgs {
				t.Errorf("lost %d records / %d ids, the injection copied %d", lost.Records, len(lost.MsgIDs), inj.CopiedMsgs)
			}
			_, bdir, err := trApply(t, p, repair.Faults{})
			if err != nil {
				t.Fatal(err)
			}
			base, _ := rmq.ParseFileName(inj.File)
			data, err := os.ReadFile(filepath.Join(store, "commitlog", inj.File))
			if err != nil {
				t.Fatal(err)
			}
			for i := end - base; i < int64(len(data)); i++ {
				if data[i] != 0 {
					t.Fatalf("byte %d of %s is %#x after apply, want 0 from %d on", i, inj.File, data[i], end-base)
				}
			}
			after := trSizes(t, store)
			if len(after) != len(sizes) {
				t.Fatalf("%d files after apply, %d before", len(after), len(sizes))
			}
			for f, s := range sizes {
				if after[f] != s {
					t.Errorf("%s: size %d after apply, %d before", f, after[f], s)
				}
			}
			n := trSameCQs(t, cqs, trReadCQs(t, store))
			t.Logf("%s: end %d, %d CQ units compared with the fixed recovery", ds, end, n)
			trScanClean(t, store, end)
			if _, err := repair.Undo(context.Background(), bdir, repair.UndoOptions{Apply: true}); err != nil {
				t.Fatal(err)
			}
			testutil.SameTree(t, orig, testutil.TreeHash(t, store))
		})
	}
}

// trScanClean runs a fresh commitlog scan: no warning or error, and the
// recovery end is end.
func trScanClean(t *testing.T, store string, end int64) {
	t.Helper()
	res, err := scanrmq.ScanCommitLog(context.Background(), scanrmq.Config{Root: store}, scan.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range res.Findings {
		if f.Severity >= scan.Warning {
			t.Errorf("after apply: %s %s@%d: %s", f.Code, f.Path, f.Offset, f.Message)
		}
	}
	if res.RecoveryEnd == nil || *res.RecoveryEnd != end {
		t.Errorf("after apply: recovery end %v, want %d", res.RecoveryEnd, end)
	}
}

// TestTruncateDTornCRC: the record with the flipped body byte and its
// consume queue unit are dropped exactly as the real recovery did, and
// the index file the broker discarded is listed for rebuild-index.
func TestTruncateDTornCRC(t *testing.T) {
	const ds = "rmq533-d-torn-crc"
	end, cqs := trRecovered(t, ds+".recover.jsonl")
	raw := trRawCQ(t, ds+".decode.jsonl")
	var lastID string
	wantIndex := map[string]bool{}
	var keptIndex []string
	for _, l := range trOracle(t, "rmq533-a-clean.decode.jsonl") { // the same record, undamaged
		if l.Kind == "msg" && l.PhyOffset == end {
			lastID = l.MsgID
		}
	}
	for _, l := range trOracle(t, ds+".decode.jsonl") {
		if l.Kind == "index_header" && l.EndPhyOffset >= end {
			wantIndex["index/"+l.File] = true
		}
	}
	for _, l := range trOracle(t, ds+".recover.jsonl") {
		if l.Kind == "index_files" && l.Phase == "after_load" {
			if err := json.Unmarshal(l.Files, &keptIndex); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, k := range keptIndex {
		if wantIndex["index/"+k] {
			t.Fatalf("oracle kept index file %s that references the dropped record", k)
		}
	}
	store := trStore(t, ds)
	orig := testutil.TreeHash(t, store)
	p, rep := trPlan(t, store)
	if rep.RecoveryEnd != end || rep.Reason != scanrmq.CodeBodyCRC {
		t.Fatalf("end %d reason %s; oracle end %d", rep.RecoveryEnd, rep.Reason, end)
	}
	var clActs, cqActs int
	for _, a := range p.Actions {
		switch {
		case strings.HasPrefix(a.Path, "commitlog"):
			clActs++
			if a.Lost.Records != 1 || len(a.Lost.MsgIDs) != 1 || a.Lost.MsgIDs[0] != lastID {
				t.Errorf("commitlog loss %+v, want the one record %s", a.Lost, lastID)
			}
		case strings.HasPrefix(a.Path, "consumequeue"):
			cqActs++
			if a.Reason != scanrmq.CodeCQBeyondRecovery || a.Lost.Records != 1 {
				t.Errorf("CQ action %+v", a)
			}
		}
	}
	if clActs != 1 || cqActs != 1 {
		t.Fatalf("%d commitlog and %d CQ actions, want 1 and 1: %+v", clActs, cqActs, p.Actions)
	}
	var gotIndex []string
	for _, f := range rep.IndexFiles {
		gotIndex = append(gotIndex, f.Path)
		if !wantIndex[f.Path] || f.EntriesBeyond == 0 {
			t.Errorf("index file %+v listed; the oracle's are %v", f, wantIndex)
		}
	}
	if len(gotIndex) != len(wantIndex) {
		t.Errorf("index files %v, want %v", gotIndex, wantIndex)
	}
	changed := 0
	for q, w := range cqs {
		if d := len(raw[q]) - len(w); d != 0 {
			changed++
			if len(rep.ConsumeQueues) != 1 || rep.ConsumeQueues[0].Topic+"/"+trItoa(rep.ConsumeQueues[0].QueueID) != q ||
				rep.ConsumeQueues[0].UnitsBefore != len(raw[q]) || rep.ConsumeQueues[0].UnitsDropped != d {
				t.Errorf("%s: oracle %d -> %d units; report %+v", q, len(raw[q]), len(w), rep.ConsumeQueues)
			}
			t.Logf("%s: %d -> %d units (oracle)", q, len(raw[q]), len(w))
		}
	}
	if changed != 1 {
		t.Fatalf("the oracle changed %d queues, want 1", changed)
	}
	_, bdir, err := trApply(t, p, repair.Faults{})
	if err != nil {
		t.Fatal(err)
	}
	n := trSameCQs(t, cqs, trReadCQs(t, store))
	t.Logf("end %d; %d CQ units compared with the real recovery", end, n)
	trScanClean(t, store, end)
	if _, err := repair.Undo(context.Background(), bdir, repair.UndoOptions{Apply: true}); err != nil {
		t.Fatal(err)
	}
	testutil.SameTree(t, orig, testutil.TreeHash(t, store))
}

func trItoa(i int) string { return strconv.Itoa(i) }

// TestTruncateKeepsFilesBeforeRecoveryStart: with an abort file the broker
// recovers from the last file whose first record is not newer than the
// checkpoint (file 3 in both fixtures, from their recover logs) and never
// reads or truncates the files before it (truncateDirtyFiles touches only
// files ending past the end). Zeroing the tail of file 1 must then leave
// the plan as on the undamaged store: b-abnormal nothing, c-stale only
// its stale tail in file 3; no action on files 0 to 2.
func TestTruncateKeepsFilesBeforeRecoveryStart(t *testing.T) {
	for _, c := range []struct{ ds, recovered string }{
		{"rmq533-b-abnormal", "rmq533-b-abnormal.recover.jsonl"},
		{"rmq497-c-stale", "rmq497-c-stale.fixed-recovery.recover.jsonl"},
	} {
		t.Run(c.ds, func(t *testing.T) {
			t.Parallel()
			store := trStore(t, c.ds)
			p1 := filepath.Join(store, "commitlog", rmq.FormatFileName(262144))
			f, err := os.OpenFile(p1, os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.WriteAt(make([]byte, 262144/2), 262144/2); err != nil { // mid-record or not: zeros to the end
				t.Fatal(err)
			}
			f.Close()
			p, rep := trPlan(t, store)
			end, _ := trRecovered(t, c.recovered)
			if rep.RecoveryEnd != end {
				t.Fatalf("end %d, broker (start at file 3) %d", rep.RecoveryEnd, end)
			}
			last := "commitlog/" + rmq.FormatFileName(786432)
			for _, a := range p.Actions {
				if strings.HasPrefix(filepath.ToSlash(a.Path), "commitlog/") && filepath.ToSlash(a.Path) != last {
					t.Errorf("action on %s (%s): the broker keeps it", a.Path, a.Op)
				}
			}
			if got := len(p.Actions) > 0; got != trDamaged[c.ds] {
				t.Errorf("%d actions, want actions: %v", len(p.Actions), trDamaged[c.ds])
			}
		})
	}
}

// TestTruncateNormalRecoveryStart: after a clean shutdown recoverNormally
// starts at the third file from the last (4.9.7: file 1 of 4, from its
// log) or at the last file the consume queues reach (5.3.3: file 3, with
// abort.bak and compaction/ in the store saying 5.x) and never reads or
// truncates the files before it. Zeros from a record boundary in such a
// file leave the plan as on the undamaged store: nothing, and the
// broker's recovery end. On the 4.9.7 store zeroed in file 1 the two
// rules disagree (4.x stops there, 5.x keeps all) and nothing in the
// store proves 4.x: truncate refuses instead of cutting files 1 to 3.
func TestTruncateNormalRecoveryStart(t *testing.T) {
	for _, c := range []struct {
		ds      string
		base    int64
		refused bool
	}{
		{"rmq533-a-clean", 262144, false},
		{"rmq533-e-propcrc-clean", 524288, false},
		{"rmq497-a-clean", 0, false},
		{"rmq497-a-clean", 262144, true},
	} {
		t.Run(c.ds+"/"+trItoa(int(c.base)), func(t *testing.T) {
			t.Parallel()
			var in []int64
			for _, l := range trOracle(t, c.ds+".decode.jsonl") {
				if l.Kind == "msg" && l.File == rmq.FormatFileName(c.base) {
					in = append(in, l.Pos)
				}
			}
			if len(in) < 2 {
				t.Fatal("oracle: no records in the file")
			}
			cut := in[len(in)/2]
			store := trStore(t, c.ds)
			f, err := os.OpenFile(filepath.Join(store, "commitlog", rmq.FormatFileName(c.base)), os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.WriteAt(make([]byte, 262144-cut), cut); err != nil {
				t.Fatal(err)
			}
			f.Close()
			if c.refused {
				_, _, err := PlanTruncate(context.Background(), scanrmq.Config{Root: store})
				if err == nil || !strings.Contains(err.Error(), "not known") {
					t.Fatalf("planned (err %v): which recovery runs is not known", err)
				}
				return
			}
			p, rep := trPlan(t, store)
			end, _ := trRecovered(t, c.ds+".recover.jsonl")
			if rep.RecoveryEnd != end {
				t.Fatalf("end %d, broker %d", rep.RecoveryEnd, end)
			}
			for _, a := range p.Actions {
				t.Errorf("action on %s (%s): the broker keeps the store as it is", a.Path, a.Op)
			}
		})
	}
}
