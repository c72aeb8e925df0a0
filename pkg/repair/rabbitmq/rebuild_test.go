package rabbitmq

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/storectl/storectl/pkg/format/etf"

	"github.com/storectl/storectl/internal/testutil"
	rfmt "github.com/storectl/storectl/pkg/format/rabbitmq"
	"github.com/storectl/storectl/pkg/repair"
	rscan "github.com/storectl/storectl/pkg/scan/rabbitmq"
)

// rbFixtures are the clean-shutdown datasets whose .ets files the real
// brokers (3.10.8 on OTP 25, 4.0.5 on OTP 27) wrote at shutdown.
var rbFixtures = []string{"rabbitmq", "rabbitmq-4.0"}

// rbUnpack unpacks a fixture's clean-shutdown dataset and returns the
// node dir, the persistent store dir and the broker's two .ets files.
func rbUnpack(t *testing.T, fixture string) (root, store string, index, summary []byte) {
	t.Helper()
	root, vhost := vhostOf(t, untarNode(t, testutil.Testdata(fixture, "datasets", "clean-shutdown.tar.gz")))
	store = filepath.Join(vhost, rbStoreDir)
	return root, store, rbRead(t, filepath.Join(store, rbIndexFile)), rbRead(t, filepath.Join(store, rbSummaryFile))
}

func rbRead(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// rbPlan runs PlanRebuildIndex on root and removes the stage at cleanup.
func rbPlan(t *testing.T, root string) (*repair.Plan, *RebuildReport) {
	t.Helper()
	p, rep, err := PlanRebuildIndex(context.Background(), rscan.Config{Root: root})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rep.RemoveStage() })
	if len(rep.VHosts) != 1 {
		t.Fatalf("%d vhosts in the report, want 1", len(rep.VHosts))
	}
	for _, a := range p.Actions {
		if a.Reason == "" || a.Lost.Note == "" {
			t.Errorf("action %s (%s %s) lacks a reason or note", a.ID, a.Op, a.Path)
		}
		if a.Source != "" {
			if rel, err := filepath.Rel(root, a.Source); err == nil && !strings.HasPrefix(rel, "..") {
				t.Errorf("action %s stages %s inside the data dir", a.ID, a.Source)
			}
		}
	}
	return p, rep
}

// rbStaged returns the staged content of the replace-file of name.
func rbStaged(t *testing.T, p *repair.Plan, name string) []byte {
	t.Helper()
	for _, a := range p.Actions {
		if a.Op == repair.OpReplaceFile && filepath.Base(a.Path) == name {
			return rbRead(t, a.Source)
		}
	}
	t.Fatalf("no replace-file of %s in the plan (%d actions)", name, len(p.Actions))
	return nil
}

// rbCompareWithBroker compares a rebuilt index and summary with the
// broker's own dumps object by object and returns how many were compared.
// The index is an ETS set: tab2file writes it in hash-table order (the
// emulator's internal hash of the key over a bucket count that depends on
// the table's growth history), which cannot be reproduced, so it is
// compared as a set keyed by msg id. The summary is an ordered_set: its
// order (by file number) must match too.
func rbCompareWithBroker(t *testing.T, name string, gotIdx, wantIdx, gotSum, wantSum []byte) (objects int) {
	t.Helper()
	got, err := rfmt.ReadMsgStoreIndex(gotIdx)
	if err != nil {
		t.Fatalf("%s: rebuilt index: %v", name, err)
	}
	want, err := rfmt.ReadMsgStoreIndex(wantIdx)
	if err != nil {
		t.Fatalf("%s: broker index: %v", name, err)
	}
	gotBy := map[[16]byte]rfmt.MsgLocation{}
	for _, l := range got {
		if _, dup := gotBy[l.MsgID]; dup {
			t.Errorf("%s: rebuilt index lists %x twice", name, l.MsgID)
		}
		gotBy[l.MsgID] = l
	}
	live, bad := 0, 0
	for _, w := range want {
		if w.RefCount > 0 {
			live++
		}
		if g, ok := gotBy[w.MsgID]; !ok || g != w {
			bad++
			t.Errorf("%s: broker %+v, rebuilt %+v (found %v)", name, w, g, ok)
		}
	}
	if len(got) != len(want) {
		t.Errorf("%s: rebuilt index has %d entries, the broker's %d", name, len(got), len(want))
	}
	gs, err := rfmt.ReadFileSummary(gotSum)
	if err != nil {
		t.Fatalf("%s: rebuilt summary: %v", name, err)
	}
	ws, err := rfmt.ReadFileSummary(wantSum)
	if err != nil {
		t.Fatalf("%s: broker summary: %v", name, err)
	}
	if len(gs) != len(ws) {
		t.Errorf("%s: rebuilt summary has %d files, the broker's %d", name, len(gs), len(ws))
	}
	for i := range min(len(gs), len(ws)) {
		if !reflect.DeepEqual(rbNorm(gs[i]), rbNorm(ws[i])) {
			bad++
			t.Errorf("%s: summary %d: broker %+v, rebuilt %+v", name, i, ws[i], gs[i])
		}
	}
	t.Logf("%s: %d index entries (%d live, %d with ref count 0) and %d file summaries compared with the broker's dumps, %d mismatches",
		name, len(want), live, len(want)-live, len(ws), bad)
	return len(want) + len(ws)
}

// rbNorm makes nil and undefined compare equal.
func rbNorm(s rfmt.FileSummary) rfmt.FileSummary {
	s.Left, s.Right, s.Readers = rbTerm(s.Left), rbTerm(s.Right), rbTerm(s.Readers)
	return s
}

// (a) and (e): with both .ets files gone, the rebuilt tables hold the same
// objects as the broker's own clean-shutdown dumps.
func TestRebuildFromScratchMatchesBroker(t *testing.T) {
	for _, fx := range rbFixtures {
		root, store, idx, sum := rbUnpack(t, fx)
		for _, n := range []string{rbIndexFile, rbSummaryFile} {
			if err := os.Remove(filepath.Join(store, n)); err != nil {
				t.Fatal(err)
			}
		}
		before := testutil.TreeHash(t, root)
		p, rep := rbPlan(t, root)
		testutil.SameTree(t, before, testutil.TreeHash(t, root))
		vr := rep.VHosts[0]
		if vr.State != RebuildClean || len(p.Actions) != 2 || vr.Index.Existing != "absent" || vr.Summary.Existing != "absent" {
			t.Fatalf("%s: state %s (%s), %d actions, index %s, summary %s", fx, vr.State, vr.Why, len(p.Actions), vr.Index.Existing, vr.Summary.Existing)
		}
		for _, a := range p.Actions {
			if a.Pre.Exists {
				t.Errorf("%s: %s: precondition says the deleted file exists", fx, a.Path)
			}
		}
		gi, gs := rbStaged(t, p, rbIndexFile), rbStaged(t, p, rbSummaryFile)
		if n := rbCompareWithBroker(t, fx, gi, idx, gs, sum); n == 0 {
			t.Errorf("%s: nothing compared", fx)
		}
		// Built from scratch the info item differs (new table id, owner
		// pid, memory); the file summary's objects are in key order, so
		// everything after the info item is byte-identical.
		if tail := func(b []byte) []byte { f, _ := rfmt.ReadETSFile(b); return b[f.ObjOffs[0]:] }; !bytes.Equal(tail(gs), tail(sum)) {
			t.Errorf("%s: file_summary.ets objects are not byte-identical to the broker's", fx)
		}
	}
}

// (b): on the untouched fixtures the plan is empty and nothing changes,
// not even beside the data dir (no stage left behind).
func TestRebuildDryRunUntouched(t *testing.T) {
	for _, fx := range rbFixtures {
		root, _, idx, sum := rbUnpack(t, fx)
		parent := filepath.Dir(root)
		before := testutil.TreeHash(t, parent)
		p, rep := rbPlan(t, root)
		testutil.SameTree(t, before, testutil.TreeHash(t, parent))
		vr := rep.VHosts[0]
		if len(p.Actions) != 0 || rep.StageDir != "" || vr.State != RebuildClean {
			t.Fatalf("%s: %d actions, stage %q, state %s (%s)", fx, len(p.Actions), rep.StageDir, vr.State, vr.Why)
		}
		if vr.Index.Existing != "equal" || vr.Summary.Existing != "equal" {
			t.Errorf("%s: index %s (%s), summary %s (%s)", fx, vr.Index.Existing, vr.Index.Detail, vr.Summary.Existing, vr.Summary.Detail)
		}
		locs, _ := rfmt.ReadMsgStoreIndex(idx)
		sums, _ := rfmt.ReadFileSummary(sum)
		if vr.Index.Objects != len(locs) || vr.Summary.Objects != len(sums) {
			t.Errorf("%s: rebuilt %d/%d objects, the broker's files %d/%d", fx, vr.Index.Objects, vr.Summary.Objects, len(locs), len(sums))
		}
	}
}

// (c): a test-made change to one object of either dump is planned back to
// the broker's content; apply restores the broker's file byte for byte,
// undo restores the damaged one byte for byte.
func TestRebuildRestoresChangedObject(t *testing.T) {
	for _, fx := range rbFixtures {
		root, store, idx, sum := rbUnpack(t, fx)
		pristine := testutil.TreeHash(t, root)
		for _, name := range []string{rbIndexFile, rbSummaryFile} {
			orig := map[string][]byte{rbIndexFile: idx, rbSummaryFile: sum}[name]
			f, err := rfmt.ReadETSFile(orig)
			if err != nil {
				t.Fatal(err)
			}
			o := rfmt.ETSEncodeOptions{Info: f.Info, Atoms: etf.AtomsLatin1}
			if fx != "rabbitmq" {
				o.Atoms = etf.AtomsUTF8
			}
			var damaged []byte
			if name == rbIndexFile {
				locs, _ := rfmt.ReadMsgStoreIndex(orig)
				locs[len(locs)/2].Offset += 9 // one record's offset moved
				damaged, err = rfmt.EncodeMsgStoreIndex(locs, o)
			} else {
				sums, _ := rfmt.ReadFileSummary(orig)
				sums[len(sums)/2].ValidTotalSize -= 100
				damaged, err = rfmt.EncodeFileSummary(sums, o)
			}
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(store, name), damaged, 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Chtimes(filepath.Join(store, name), fixedTime, fixedTime); err != nil {
				t.Fatal(err)
			}
			before := testutil.TreeHash(t, root)
			p, rep := rbPlan(t, root)
			testutil.SameTree(t, before, testutil.TreeHash(t, root))
			tab := rep.VHosts[0].Index
			if name == rbSummaryFile {
				tab = rep.VHosts[0].Summary
			}
			if len(p.Actions) != 1 || filepath.Base(p.Actions[0].Path) != name || tab.Existing != "differs" || tab.Changed != 1 || tab.Added+tab.Removed != 0 {
				t.Fatalf("%s/%s: %d actions, table %+v", fx, name, len(p.Actions), tab)
			}
			_, bdir, err := apply(t, p, repair.Faults{})
			if err != nil {
				t.Fatal(err)
			}
			// The broker's order and info are kept, so the repaired dump
			// is the broker's file byte for byte.
			if got := rbRead(t, filepath.Join(store, name)); !bytes.Equal(got, orig) {
				t.Errorf("%s/%s: after apply %d bytes, not the broker's %d", fx, name, len(got), len(orig))
			}
			after := testutil.TreeHash(t, root)
			for k, h := range pristine {
				if after[k] != h && !strings.HasSuffix(k, name) {
					t.Errorf("%s/%s: apply changed %s", fx, name, k)
				}
			}
			if _, err := repair.Undo(context.Background(), bdir, repair.UndoOptions{Apply: true}); err != nil {
				t.Fatal(err)
			}
			testutil.SameTree(t, before, testutil.TreeHash(t, root))
			if got := rbRead(t, filepath.Join(store, name)); !bytes.Equal(got, damaged) {
				t.Errorf("%s/%s: undo did not restore the damaged bytes", fx, name)
			}
			rbWrite(t, filepath.Join(store, name), orig) // the broker's file again, for the next case
		}
	}
}
