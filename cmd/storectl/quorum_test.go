package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/storectl/storectl/internal/testutil"
	"github.com/storectl/storectl/pkg/format/ra"
	"github.com/storectl/storectl/pkg/salvage"
)

// qqNode copies the 3.10.8 dataset R3 (testdata/rabbitmq-3.10-qq: queues
// wa and wb, whose newest entries are only in the WAL) and points the
// data dir that 3.10.8 pins in each replica's config at the copy, so
// that a 3.10.8 broker started on the copy reads the copy. It returns
// the node dir and node name.
func qqNode(t *testing.T) (string, string) {
	t.Helper()
	const node, pinned = "rmq310@localhost", "/tmp/qq310/R3/mnesia/rmq310@localhost"
	dir := filepath.Join(testutil.Untar(t, testutil.Testdata("rabbitmq-3.10-qq", "datasets", "R3.tar.gz")), node)
	cfgs, _ := filepath.Glob(filepath.Join(dir, "*", node, "*", "config"))
	if len(cfgs) == 0 {
		t.Fatal("no replica configs")
	}
	for _, c := range cfgs {
		b, err := os.ReadFile(c)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(c, bytes.ReplaceAll(b, []byte(pinned), []byte(dir)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir, node
}

// TestQuorumTruncateRealBroker: a flipped byte in the middle of a 3.10.8
// WAL keeps every quorum queue from starting; truncate's dry run changes
// nothing and names per queue what it drops and what is left; undo puts
// back every byte; after the apply the real broker starts on the data and
// holds what the plan said.
func TestQuorumTruncateRealBroker(t *testing.T) {
	testutil.RequireRabbitMQ(t)
	dir, node := qqNode(t)
	sys := filepath.Join(dir, "quorum", node)
	wals, _ := filepath.Glob(filepath.Join(sys, "*.wal"))
	if len(wals) != 1 {
		t.Fatalf("WALs: %v", wals)
	}
	b, err := os.ReadFile(wals[0])
	if err != nil {
		t.Fatal(err)
	}
	var recs []ra.WALRecord
	rd := ra.NewWALReader(bytes.NewReader(b), int64(len(b)))
	for rd.Next() {
		recs = append(recs, *rd.Record())
	}
	mid := recs[len(recs)/2]
	b[mid.Offset+int64(mid.HeaderLen)+int64(mid.DataLen)/2] ^= 0xff
	if err := os.WriteFile(wals[0], b, 0o644); err != nil {
		t.Fatal(err)
	}
	damaged := testutil.TreeHash(t, dir)

	code, out, _ := runCLI(t, "verify", "-o", "json", dir)
	var v struct {
		Queues []struct {
			Queue     string `json:"queue"`
			NextStart struct {
				State string `json:"state"`
			} `json:"next_start"`
		} `json:"queues"`
	}
	if err := json.Unmarshal([]byte(out), &v); err != nil || code != exitFindings {
		t.Fatalf("verify: exit %d, %v", code, err)
	}
	down := 0
	for _, q := range v.Queues {
		if q.NextStart.State == "down" {
			down++
		}
	}
	if down != 2 {
		t.Fatalf("verify: %d queues down, want wa and wb: %s", down, out)
	}

	code, out, _ = runCLI(t, "truncate", "-o", "json", dir)
	testutil.SameTree(t, damaged, testutil.TreeHash(t, dir))
	var plan struct {
		Summary struct {
			Extra struct {
				Quorum struct {
					Queues []struct {
						Queue     string      `json:"queue"`
						Entries   int         `json:"entries"`
						Indexes   [][2]uint64 `json:"indexes"`
						KeepAfter int         `json:"keep_after"`
					} `json:"queues"`
					OnlyCopy []string `json:"only_copy"`
				} `json:"quorum_truncate"`
			} `json:"extra"`
		} `json:"summary"`
	}
	if err := json.Unmarshal([]byte(out), &plan); err != nil || code != exitFindings {
		t.Fatalf("truncate dry run: exit %d, %v\n%s", code, err, out)
	}
	keep := map[string]int{}
	for _, q := range plan.Summary.Extra.Quorum.Queues {
		if q.Entries == 0 || len(q.Indexes) == 0 || q.KeepAfter < 0 {
			t.Fatalf("plan: %+v", q)
		}
		keep[q.Queue] = q.KeepAfter
	}
	if len(keep) == 0 || len(plan.Summary.Extra.Quorum.OnlyCopy) != len(keep) {
		t.Fatalf("plan: %+v", plan.Summary.Extra.Quorum)
	}
	// without --force: refused, nothing written
	if code, _, _ := runCLI(t, "truncate", "--apply", "--yes", "--backup-dir", filepath.Join(t.TempDir(), "bk0"), dir); code != exitRefused {
		t.Fatalf("apply without --force: exit %d", code)
	}
	testutil.SameTree(t, damaged, testutil.TreeHash(t, dir))

	bk := filepath.Join(t.TempDir(), "bk")
	if code, out, errOut := runCLI(t, "truncate", "--apply", "--yes", "--force", "--backup-dir", bk, dir); code != exitOK {
		t.Fatalf("apply: exit %d\n%s\n%s", code, out, errOut)
	}
	if code, out, errOut := runCLI(t, "undo", "--apply", "--yes", bk); code != exitOK {
		t.Fatalf("undo: exit %d\n%s\n%s", code, out, errOut)
	}
	testutil.SameTree(t, damaged, testutil.TreeHash(t, dir))
	if code, out, errOut := runCLI(t, "truncate", "--apply", "--yes", "--force", "--backup-dir", filepath.Join(t.TempDir(), "bk2"), dir); code != exitOK {
		t.Fatalf("apply again: exit %d\n%s\n%s", code, out, errOut)
	}

	// what verify predicts for every queue now (the cut one and the other)
	_, out, _ = runCLI(t, "verify", "-o", "json", dir)
	var after struct {
		Queues []struct {
			Queue string `json:"queue"`
			Keep  int    `json:"keep"`
		} `json:"queues"`
	}
	if err := json.Unmarshal([]byte(out), &after); err != nil {
		t.Fatal(err)
	}
	predicted := map[string]int{}
	for _, q := range after.Queues {
		predicted[q.Queue] = q.Keep
	}
	r := testutil.StartRabbitOn(t, dir, node)
	got := r.QuorumMessages(t, 11*time.Second)
	r.Stop(t)
	for q, n := range keep {
		if got[q] != n {
			t.Errorf("%s: the broker holds %d after the apply, the plan said %d (broker: %v)", q, got[q], n, got)
		}
	}
	if len(got) != 2 || fmt.Sprint(got) != fmt.Sprint(predicted) {
		t.Errorf("the broker holds %v, verify predicted %v", got, predicted)
	}
	t.Logf("after the cut the real broker holds %v, as the plan said %v and verify predicted %v", got, keep, predicted)
}

// TestQuorumSalvageCLI: salvage of Q1 (RabbitMQ 4.0.5) exports the 700
// messages its three quorum queues hold (exit 0) and says quorum/ and
// coordination/ were checked; on a copy with a flipped byte in an entry
// of qq2's segment it exports the other 699, names the damaged entry, and
// exits 1.
func TestQuorumSalvageCLI(t *testing.T) {
	t.Parallel()
	node := filepath.Join(testutil.Untar(t, testutil.Testdata("rabbitmq-4.0-qq-stream", "datasets", "Q1.tar.gz")), "rmq40@localhost")
	type salvageOut struct {
		Run struct {
			Components []struct {
				Path    string `json:"path"`
				Checked bool   `json:"checked"`
			} `json:"components"`
		} `json:"run"`
		Summary struct {
			Extra struct {
				Salvage struct {
					Selected int `json:"selected"`
					Damaged  []struct {
						Queue  string `json:"queue"`
						Path   string `json:"path"`
						Offset int64  `json:"offset"`
						Index  uint64 `json:"raft_index"`
					} `json:"damaged"`
				} `json:"salvage"`
			} `json:"extra"`
		} `json:"summary"`
	}
	outs := t.TempDir()
	run := func(name string) (int, salvageOut) {
		code, out, errOut := runCLI(t, "salvage", "-o", "json", "--out", filepath.Join(outs, name), node)
		var s salvageOut
		if err := json.Unmarshal([]byte(out), &s); err != nil {
			t.Fatalf("%s: %v\n%s\n%s", name, err, out, errOut)
		}
		return code, s
	}
	code, s := run("clean")
	checked := map[string]bool{}
	for _, c := range s.Run.Components {
		checked[c.Path] = c.Checked
	}
	if code != exitOK || s.Summary.Extra.Salvage.Selected != 700 || !checked["quorum"] || !checked["coordination"] {
		t.Fatalf("clean Q1: exit %d, %d exported, checked %v", code, s.Summary.Extra.Salvage.Selected, checked)
	}
	// a flipped byte near the end of the enqueue entry of one of qq2's
	// exported messages in its segment
	seg := filepath.ToSlash(filepath.Join("quorum", "rmq40@localhost", "2F_QQ2Q5L9DBJGSLBP", "00000001.segment"))
	msgs, err := salvage.ReadMessages(filepath.Join(outs, "clean"))
	if err != nil {
		t.Fatal(err)
	}
	var victim *salvage.Message
	for i := range msgs {
		if m := &msgs[i]; m.Path == seg && m.Size > 200 && victim == nil && i > len(msgs)/3 {
			victim = m
		}
	}
	if victim == nil {
		t.Fatal("no qq2 message in its segment")
	}
	b, err := os.ReadFile(filepath.Join(node, seg))
	if err != nil {
		t.Fatal(err)
	}
	b[victim.Offset+victim.RecordSize-40] ^= 0xff
	if err := os.WriteFile(filepath.Join(node, seg), b, 0o644); err != nil {
		t.Fatal(err)
	}
	code, s = run("damaged")
	d := s.Summary.Extra.Salvage.Damaged
	if code != exitFindings || s.Summary.Extra.Salvage.Selected != 699 || len(d) != 1 || d[0].Queue != "qq2" ||
		d[0].Path != seg || d[0].Offset != victim.Offset || d[0].Index != *victim.RaIndex {
		t.Fatalf("damaged Q1: exit %d, %d exported, damaged %+v (victim %s@%d)", code, s.Summary.Extra.Salvage.Selected, d, victim.Path, victim.Offset)
	}
}

// TestQuorumVerifyCluster: verify given C1's three node dirs (3.10.8)
// compares each quorum queue's replicas and names rmq310a's as the most
// complete and rmq310c's as behind; a peer without quorum/ is refused.
func TestQuorumVerifyCluster(t *testing.T) {
	t.Parallel()
	d := testutil.Untar(t, testutil.Testdata("rabbitmq-3.10-qq", "datasets", "C1.tar.gz"))
	dirs := []string{filepath.Join(d, "rmq310a@localhost"), filepath.Join(d, "rmq310b@localhost"), filepath.Join(d, "rmq310c@localhost")}
	code, out, errOut := runCLI(t, append([]string{"verify", "-o", "json"}, dirs...)...)
	var v struct {
		Findings []struct {
			Code string `json:"code"`
		} `json:"findings"`
		Summary struct {
			Extra struct {
				Replicas []struct {
					Queue        string `json:"queue"`
					MostComplete string `json:"most_complete"`
					Replicas     []struct {
						Node   string `json:"node"`
						Behind uint64 `json:"behind"`
					} `json:"replicas"`
				} `json:"quorum_replicas"`
			} `json:"extra"`
		} `json:"summary"`
	}
	if err := json.Unmarshal([]byte(out), &v); err != nil || code != exitFindings {
		t.Fatalf("verify: exit %d %v\n%s", code, err, errOut)
	}
	behind := 0
	for _, f := range v.Findings {
		if f.Code == "rabbitmq.quorum.replica-behind" {
			behind++
		}
	}
	rs := v.Summary.Extra.Replicas
	if behind != 3 || len(rs) != 3 {
		t.Fatalf("%d replica-behind findings, %d queues compared", behind, len(rs))
	}
	for _, q := range rs {
		if q.MostComplete != "rmq310a@localhost" || len(q.Replicas) != 3 || q.Replicas[2].Node != "rmq310c@localhost" || q.Replicas[2].Behind == 0 {
			t.Fatalf("%+v", q)
		}
	}
	classic := testutil.Untar(t, testutil.Testdata("rabbitmq-4.0", "datasets", "crash.tar.gz"))
	if code, _, _ := runCLI(t, "verify", dirs[0], filepath.Join(classic, "rmq40@localhost", "msg_stores")); code != exitUsage {
		t.Fatalf("a peer without quorum/: exit %d", code)
	}
}
