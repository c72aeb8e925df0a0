package rabbitmq

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/storectl/storectl/internal/testutil"
	"github.com/storectl/storectl/pkg/repair"
	rscan "github.com/storectl/storectl/pkg/scan/rabbitmq"
)

// damaged names the datasets whose current .rdq has a torn tail; every
// other node dataset must give an empty plan.
var damaged = map[string]bool{"rabbitmq/crash-mid-write-confirmed": true}

// TestTruncateDryRunDatasets plans every RabbitMQ dataset: planning
// changes no byte; only the torn dataset gets actions; the edge-case
// tarball (bare .rdq files, no node) is refused.
func TestTruncateDryRunDatasets(t *testing.T) {
	var tarballs []string
	for _, d := range []string{"rabbitmq", "rabbitmq-4.0"} {
		m, err := filepath.Glob(testutil.Testdata(d, "datasets", "*.tar.gz"))
		if err != nil {
			t.Fatal(err)
		}
		tarballs = append(tarballs, m...)
	}
	if len(tarballs) < 7 {
		t.Fatalf("only %d datasets found", len(tarballs))
	}
	for _, tb := range tarballs {
		name := filepath.Base(filepath.Dir(filepath.Dir(tb))) + "/" + strings.TrimSuffix(filepath.Base(tb), ".tar.gz")
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir := untarNode(t, tb)
			before := testutil.TreeHash(t, dir)
			p, rep, err := PlanTruncate(context.Background(), rscan.Config{Root: dir})
			testutil.SameTree(t, before, testutil.TreeHash(t, dir))
			if strings.HasSuffix(name, "/edge-cases") {
				if !errors.Is(err, ErrNoVHost) {
					t.Fatalf("bare .rdq files: err %v, want ErrNoVHost", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := len(p.Actions) > 0; got != damaged[name] {
				t.Fatalf("%d actions (%+v), want actions: %v", len(p.Actions), p.Actions, damaged[name])
			}
			for _, vr := range rep.VHosts {
				if vr.RemovesCleanDot && len(p.Actions) == 0 {
					t.Errorf("report says clean.dot is removed, plan is empty")
				}
			}
		})
	}
}

// TestTruncateCrashMidWriteConfirmed: 561.rdq is cut where the real broker
// cut it, and every confirmed message a queue still holds is found by a
// fresh scan after the apply.
func TestTruncateCrashMidWriteConfirmed(t *testing.T) {
	res := testutil.Testdata("rabbitmq", "results", "crash-mid-write-confirmed")
	want := brokerSizes(t, filepath.Join(res, "restart", "rdq-after-restart.tsv"))
	dir := untarNode(t, testutil.Testdata("rabbitmq", "datasets", "crash-mid-write-confirmed.tar.gz"))
	root, vhost := vhostOf(t, dir)
	orig := testutil.TreeHash(t, dir)
	p, rep := plan(t, dir)
	if len(p.Actions) != 1 {
		t.Fatalf("%d actions, want one cut: %+v", len(p.Actions), p.Actions)
	}
	a := p.Actions[0]
	rdq := filepath.Join(root, a.Path)
	wantSize, ok := want[filepath.Base(rdq)]
	if a.Op != repair.OpTruncateFile || rdq != currentRDQ(t, vhost) || !ok || a.NewSize != wantSize || a.Reason != rscan.CodeTornTail {
		t.Fatalf("action %+v; want truncate-file of %s to %d (broker), reason %s", a, currentRDQ(t, vhost), wantSize, rscan.CodeTornTail)
	}
	if rep.VHosts[0].RemovesCleanDot || rep.VHosts[0].CleanShutdown {
		t.Errorf("crash dataset: clean.dot handling %+v", rep.VHosts[0])
	}
	before := foundReferenced(scanRecords(t, root, vhost, rscan.VHostOptions{}))
	_, bdir, err := apply(t, p, repair.Faults{})
	if err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(rdq); err != nil || st.Size() != wantSize {
		t.Fatalf("after apply: %v, size want %d", err, wantSize)
	}
	av := scanRecords(t, root, vhost, rscan.VHostOptions{})
	after := foundReferenced(av)
	expected, flood := confirmedHeld(t, res)
	storeID := amqpToStore(t, filepath.Join(res, "scan-decoded.jsonl"))
	found := 0
	for _, amqp := range slices.Sorted(maps.Keys(expected)) {
		id, ok := storeID[amqp]
		switch {
		case !ok:
			t.Errorf("confirmed %s (held by %v) has no record in the capture", amqp, expected[amqp])
		case len(queuesOf(t, av, id)) == 0:
			t.Errorf("confirmed %s (store id %s) is referenced by no queue index", amqp, id)
		case !after[id]:
			t.Errorf("confirmed %s (store id %s) not found after apply", amqp, id)
		default:
			found++
		}
	}
	if len(after) != len(before) {
		t.Errorf("referenced records found: %d before the cut, %d after", len(before), len(after))
	}
	var routable int
	readJSON(t, filepath.Join(res, "analysis.json"), &struct {
		FloodRoutable *int `json:"flood_confirmed_routable"`
	}{&routable})
	if flood != routable {
		t.Errorf("%d confirmed routable flood messages by the manifests, analysis.json says %d", flood, routable)
	}
	t.Logf("561.rdq cut to %d; %d confirmed held messages (%d flood) all found among %d referenced records", wantSize, found, flood, len(after))
	if _, err := repair.Undo(context.Background(), bdir, repair.UndoOptions{Apply: true}); err != nil {
		t.Fatal(err)
	}
	testutil.SameTree(t, orig, testutil.TreeHash(t, dir))
}

// TestTruncateCleanShutdownTorn: a torn tail appended to the current file
// of a cleanly stopped node is cut and clean.dot moved to the backup; Undo
// puts back both.
func TestTruncateCleanShutdownTorn(t *testing.T) {
	for _, ds := range []string{"rabbitmq", "rabbitmq-4.0"} {
		t.Run(ds, func(t *testing.T) {
			t.Parallel()
			dir, rdq, size, id, _ := tornCleanStore(t, testutil.Testdata(ds, "datasets", "clean-shutdown.tar.gz"))
			root, vhost := vhostOf(t, dir)
			cleanDot := filepath.Join(vhost, "msg_store_persistent", "clean.dot")
			orig := testutil.TreeHash(t, dir)
			p, rep := plan(t, dir)
			got := map[string]repair.Action{}
			for _, a := range p.Actions {
				got[filepath.Join(root, a.Path)] = a
			}
			cut, rm := got[rdq], got[cleanDot]
			if len(p.Actions) != 2 || cut.Op != repair.OpTruncateFile || cut.NewSize != size || rm.Op != repair.OpRemoveFile {
				t.Fatalf("actions %+v; want truncate-file of %s to %d and remove-file of clean.dot", p.Actions, rdq, size)
			}
			if cut.Reason != rscan.CodeTornTail || len(cut.Lost.MsgIDs) != 1 || cut.Lost.MsgIDs[0] != id || rm.Reason != rscan.CodeCleanStateStale {
				t.Errorf("cut %+v / remove %+v", cut, rm)
			}
			if vr := rep.VHosts[0]; !vr.CleanShutdown || !vr.RemovesCleanDot || len(vr.Notes) == 0 {
				t.Errorf("report %+v does not say clean.dot goes", vr)
			}
			b, err := os.ReadFile(rdq)
			if err != nil {
				t.Fatal(err)
			}
			_, bdir, err := apply(t, p, repair.Faults{})
			if err != nil {
				t.Fatal(err)
			}
			a, err := os.ReadFile(rdq)
			if err != nil || !bytes.Equal(a, b[:size]) {
				t.Fatalf("after apply %s is %d bytes (err %v), want its first %d bytes", rdq, len(a), err, size)
			}
			if _, err := os.Stat(cleanDot); !os.IsNotExist(err) {
				t.Fatalf("clean.dot still present after apply: %v", err)
			}
			if _, err := repair.Undo(context.Background(), bdir, repair.UndoOptions{Apply: true}); err != nil {
				t.Fatal(err)
			}
			testutil.SameTree(t, orig, testutil.TreeHash(t, dir))
		})
	}
}

// TestTruncateApplyFaults fails Apply at every counted write step of the
// clean-shutdown torn-tail plan (a cut and a removal): each run errors
// and leaves the node dir byte-identical.
func TestTruncateApplyFaults(t *testing.T) {
	tb := testutil.Testdata("rabbitmq", "datasets", "clean-shutdown.tar.gz")
	dir, rdq, _, _, torn := tornCleanStore(t, tb)
	root, _ := vhostOf(t, dir)
	rel, err := filepath.Rel(dir, rdq)
	if err != nil {
		t.Fatal(err)
	}
	relRoot, err := filepath.Rel(dir, root)
	if err != nil {
		t.Fatal(err)
	}
	p, _ := plan(t, dir)
	ref := *p
	rep, _, err := apply(t, &ref, repair.Faults{})
	if err != nil {
		t.Fatal(err)
	}
	for n := 1; n <= rep.Steps; n++ {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			t.Parallel()
			dir := untarNode(t, tb)
			appendTorn(t, filepath.Join(dir, rel), torn)
			before := testutil.TreeHash(t, dir)
			q := *p // same bytes and mtimes in every copy: only the dir differs
			q.DataDir = filepath.Join(dir, relRoot)
			frep, _, err := apply(t, &q, repair.Faults{FailAtWrite: n})
			if err == nil && len(frep.Warnings) > 0 {
				return // only manifest.json's rewrite after the journal recorded the apply: it stands (pkg/repair)
			}
			if !errors.Is(err, repair.ErrInjected) {
				t.Fatalf("step %d/%d: err %v, want the injected fault", n, rep.Steps, err)
			}
			testutil.SameTree(t, before, testutil.TreeHash(t, dir))
		})
	}
	t.Logf("%d write steps, each failed once", rep.Steps)
}

// foundReferenced is the set of msg ids of the referenced records of v's
// persistent files (scanRecords: records kept).
func foundReferenced(v *rscan.VHostScan) map[string]bool {
	out := map[string]bool{}
	for _, f := range v.Files {
		for _, r := range f.Records {
			if !f.Transient && r.Status == rscan.StatusReferenced {
				out[r.ID()] = true
			}
		}
	}
	return out
}

// queuesOf is v.QueuesOf(id), failing the test on an error.
func queuesOf(t *testing.T, v *rscan.VHostScan, id string) []string {
	t.Helper()
	qs, err := v.QueuesOf(id)
	if err != nil {
		t.Fatal(err)
	}
	return qs
}
