package rabbitmq

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/storectl/storectl/internal/testutil"
	rfmt "github.com/storectl/storectl/pkg/format/rabbitmq"
	"github.com/storectl/storectl/pkg/repair"
	rscan "github.com/storectl/storectl/pkg/scan/rabbitmq"
)

// Without clean.dot the broker rebuilds by scanning and ignores the .ets
// files: the plan is empty even when the .ets files are damaged, and the
// report says why.
func TestRebuildUncleanIsEmpty(t *testing.T) {
	root, store, _, _ := rbUnpack(t, "rabbitmq")
	for _, n := range []string{rbCleanDot, rbSummaryFile} {
		if err := os.Remove(filepath.Join(store, n)); err != nil {
			t.Fatal(err)
		}
	}
	p, rep := rbPlan(t, root)
	vr := rep.VHosts[0]
	if len(p.Actions) != 0 || vr.State != RebuildUnclean || !strings.Contains(vr.Why, "dirty recovery") || rep.StageDir != "" {
		t.Fatalf("%d actions, state %s: %s", len(p.Actions), vr.State, vr.Why)
	}
}

// Inconsistent markers: the plan removes clean.dot (forcing a dirty
// recovery) and writes no .ets file, whatever their state; each case names
// its cause. The client-ref counts come from the fixture's clean.dot and
// queue dirs, not from constants.
func TestRebuildInconsistentMarkers(t *testing.T) {
	cases := []struct {
		name string
		mod  func(t *testing.T, store, vhost string)
		why  string
	}{
		{"unparsable", func(t *testing.T, store, _ string) {
			rbWrite(t, filepath.Join(store, rbCleanDot), []byte("{client_refs,[<<1,2"))
		}, "does not parse"},
		{"no-client-refs", func(t *testing.T, store, _ string) {
			rbWrite(t, filepath.Join(store, rbCleanDot), []byte("{client_refs,[]}.\n{index_module,rabbit_msg_store_ets_index}.\n"))
		}, "client refs but"},
		{"other-index-module", func(t *testing.T, store, _ string) {
			b := rbRead(t, filepath.Join(store, rbCleanDot))
			b = bytes.Replace(b, []byte("rabbit_msg_store_ets_index"), []byte("my_index"), 1)
			rbWrite(t, filepath.Join(store, rbCleanDot), b)
		}, "index module my_index"},
		{"duplicate-ref", func(t *testing.T, store, _ string) {
			b := rbRead(t, filepath.Join(store, rbCleanDot))
			cd, err := rfmt.ParseCleanDot(b)
			if err != nil || len(cd.ClientRefs) < 2 {
				t.Fatalf("clean.dot: %v, %d refs", err, len(cd.ClientRefs))
			}
			first := b[bytes.Index(b, []byte("<<")) : bytes.Index(b, []byte(">>"))+2]
			b = bytes.Replace(b, []byte("[<<"), append(append([]byte("["), first...), []byte(",<<")...), 1)
			rbWrite(t, filepath.Join(store, rbCleanDot), b)
		}, "listed twice"},
		{"message-missing", func(t *testing.T, store, vhost string) {
			// Remove the record of one referenced message from its file
			// by zeroing its marker byte: the scan no longer finds it.
			v := scanRecords(t, filepath.Dir(vhost), vhost, rscan.VHostOptions{})
			for _, f := range v.Files {
				for _, r := range f.Records {
					if r.Status == rscan.StatusReferenced {
						b := rbRead(t, f.Abs)
						b[r.End()-1] = 0
						rbWrite(t, f.Abs, b)
						return
					}
				}
			}
			t.Fatal("no referenced record")
		}, "no .rdq file holds"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			root, store, _, _ := rbUnpack(t, "rabbitmq")
			c.mod(t, store, filepath.Dir(store))
			p, rep := rbPlan(t, root)
			vr := rep.VHosts[0]
			if vr.State != RebuildInconsistent || !strings.Contains(vr.Why, c.why) {
				t.Fatalf("state %s, why %q (want %q)", vr.State, vr.Why, c.why)
			}
			if len(p.Actions) != 1 || p.Actions[0].Op != repair.OpRemoveFile || filepath.Base(p.Actions[0].Path) != rbCleanDot ||
				p.Actions[0].Reason != rscan.CodeCleanMarkersInconsistent || rep.StageDir != "" {
				t.Fatalf("actions %+v, stage %q", p.Actions, rep.StageDir)
			}
		})
	}
}

// A torn tail after a clean shutdown: the saved summary already gives the
// current file its size before the tail, which is what the rebuild
// derives (the end of the last record), so the plan is empty and the
// clean start truncates the tail itself; the report says so.
func TestRebuildCleanTornTail(t *testing.T) {
	dir, rdq, size, _, _ := tornCleanStore(t, testutil.Testdata("rabbitmq", "datasets", "clean-shutdown.tar.gz"))
	root, _ := vhostOf(t, dir)
	p, rep := rbPlan(t, root)
	vr := rep.VHosts[0]
	if len(p.Actions) != 0 || vr.State != RebuildClean || vr.Summary.Existing != "equal" {
		t.Fatalf("%d actions, state %s, summary %+v", len(p.Actions), vr.State, vr.Summary)
	}
	want := filepath.Base(rdq)
	found := false
	for _, n := range vr.Notes {
		found = found || strings.Contains(n, want) && strings.Contains(n, "truncates it there") && strings.Contains(n, strconv.FormatInt(size, 10))
	}
	if !found {
		t.Errorf("no note on the torn %s: %q", want, vr.Notes)
	}
}

func rbWrite(t *testing.T, p string, b []byte) {
	t.Helper()
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
}
