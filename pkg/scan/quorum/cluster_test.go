package quorum_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/storectl/storectl/internal/testutil"
	"github.com/storectl/storectl/pkg/scan"
	"github.com/storectl/storectl/pkg/scan/quorum"
)

var c1Nodes = []string{"rmq310a@localhost", "rmq310b@localhost", "rmq310c@localhost"}

// c1 unpacks the 3-node 3.10.8 dataset C1 and scans each node.
func c1(t *testing.T) ([]quorum.NodeScan, string) {
	t.Helper()
	d := testutil.SharedUntar(t, testutil.Testdata("rabbitmq-3.10-qq", "datasets", "C1.tar.gz"))
	var out []quorum.NodeScan
	for _, n := range c1Nodes {
		dir := filepath.Join(d, n)
		out = append(out, quorum.NodeScan{DataDir: dir, Result: verifyDir(t, dir)})
	}
	return out, testutil.Testdata("rabbitmq-3.10-qq", "results", "C1")
}

// brokerLogIndex reads a quorum_status the broker wrote: node -> "Log
// Index" (absent for a member that was down).
func brokerLogIndex(t *testing.T, path string) map[string]uint64 {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var rows []map[string]any
	if err := json.Unmarshal(b, &rows); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	out := map[string]uint64{}
	for _, r := range rows {
		if n, ok := r["Log Index"].(float64); ok {
			out[r["Node Name"].(string)] = uint64(n)
		}
	}
	return out
}

// oracleLastIndex is the highest index of replica uid in a node's dump
// oracle (WAL records and segment entries, as ra 2.2.0 read them).
func oracleLastIndex(t *testing.T, oracle, node, uid string) uint64 {
	var last uint64
	files, _ := filepath.Glob(filepath.Join(oracle, node, "quorum", "wal", "*.wal.jsonl*"))
	segs, _ := filepath.Glob(filepath.Join(oracle, node, "quorum", uid, "*.segment.jsonl*"))
	for _, f := range append(files, segs...) {
		for _, r := range testutil.ReadJSONL[oracleRec](t, f) {
			if (r.Kind == "wal_record" && r.UID == uid || r.Kind == "segment_entry") && r.Index > last {
				last = r.Index
			}
		}
	}
	return last
}

// TestClusterReplicas: given the three nodes of C1 (3.10.8; rmq310c was
// stopped while a and b went on), each queue's replicas are compared: a
// and b end where the broker's quorum_status said before the stop, c
// where ra's own reader of c's files ends, c is named behind by the
// difference, the most complete replica's prediction equals what the
// restarted cluster held (list_queues and every delivery: id, sha256),
// and c's own would not have.
func TestClusterReplicas(t *testing.T) {
	nodes, results := c1(t)
	cmp := quorum.CompareReplicas(nodes)
	if len(cmp) != 3 {
		t.Fatalf("%d queues compared", len(cmp))
	}
	restart := listQueues(t, results)
	byNode := map[string]*quorum.Result{}
	for i, n := range nodes {
		byNode[c1Nodes[i]] = n.Result
	}
	for _, q := range cmp {
		broker := brokerLogIndex(t, filepath.Join(results, "workload", "before-stop", "quorum_status-"+q.Queue+".json"))
		if len(broker) != 2 || len(q.Replicas) != 3 || q.Agree || !q.Majority || len(q.NotGiven) != 0 || len(q.Members) != 3 {
			t.Fatalf("%s: broker %v, comparison %+v", q.Queue, broker, q)
		}
		best := q.Replicas[0]
		if best.LastIndex != broker[best.Node] || q.MostComplete != best.Node {
			t.Fatalf("%s: most complete %s at %d, the broker said %v", q.Queue, q.MostComplete, best.LastIndex, broker)
		}
		var behind quorum.ReplicaView
		for _, r := range q.Replicas {
			if want, ok := broker[r.Node]; ok {
				if r.LastIndex != want || r.Behind != 0 {
					t.Errorf("%s %s: last index %d behind %d, the broker said %d", q.Queue, r.Node, r.LastIndex, r.Behind, want)
				}
				continue
			}
			behind = r
			want := oracleLastIndex(t, filepath.Join(results, "oracle"), r.Node, r.UID)
			if r.LastIndex != want || r.Behind != best.LastIndex-want || r.Behind == 0 {
				t.Errorf("%s %s: last index %d behind %d; ra's reader ends at %d, the leader at %d", q.Queue, r.Node, r.LastIndex, r.Behind, want, best.LastIndex)
			}
		}
		if behind.Node != "rmq310c@localhost" {
			t.Fatalf("%s: the lagging replica is %q", q.Queue, behind.Node)
		}
		// the most complete replica predicts the restarted cluster
		if best.Messages != restart[q.Queue] {
			t.Errorf("%s: the most complete replica predicts %d, the restarted cluster held %d", q.Queue, best.Messages, restart[q.Queue])
		}
		var live []string
		for _, s := range byNode[best.Node].Systems {
			for _, r := range s.Replicas {
				if s.System == quorum.SystemQuorum && r.Name() == q.Queue {
					for lm := range r.Prediction().Live() {
						live = append(live, lm.MessageID+" "+lm.SHA256)
					}
				}
			}
		}
		var dumped []string
		for _, d := range readDump(t, results, q.Queue) {
			dumped = append(dumped, d.MessageID+" "+d.SHA256)
		}
		sort.Strings(live)
		sort.Strings(dumped)
		if len(live) != len(dumped) || len(live) == 0 {
			t.Fatalf("%s: %d predicted, %d delivered", q.Queue, len(live), len(dumped))
		}
		for i := range live {
			if live[i] != dumped[i] {
				t.Fatalf("%s: predicted %s, delivered %s", q.Queue, live[i], dumped[i])
			}
		}
		t.Logf("%s: most complete %s (index %d = the broker's), %s %d behind (= ra's reader of its files), predicts %d = the restarted cluster's, messages equal its deliveries; %s alone would predict %d",
			q.Queue, best.Node, best.LastIndex, behind.Node, behind.Behind, best.Messages, behind.Node, behind.Messages)
	}
	if fs := quorum.ClusterFindings(cmp, nodes[0].DataDir); len(fs) != 3 || fs[0].Code != quorum.CodeReplicaBehind || fs[0].Severity != scan.Info ||
		fs[0].Path != "rmq310c@localhost:"+cmp[0].Replicas[2].Dir {
		t.Fatalf("findings: %+v", fs)
	}
}

// TestClusterReplicasMinority: given only a and c, the comparison cannot
// see b: a's newest entries are then on one of three members as far as
// the files given tell, so they may be uncommitted, and the finding is a
// warning naming b as not given.
func TestClusterReplicasMinority(t *testing.T) {
	nodes, _ := c1(t)
	cmp := quorum.CompareReplicas([]quorum.NodeScan{nodes[0], nodes[2]})
	for _, q := range cmp {
		if q.Majority || len(q.NotGiven) != 1 || q.NotGiven[0] != "rmq310b@localhost" || q.MostComplete != "rmq310a@localhost" {
			t.Fatalf("%s: %+v", q.Queue, q)
		}
	}
	fs := quorum.ClusterFindings(cmp, nodes[0].DataDir)
	if len(fs) != 3 || fs[0].Severity != scan.Warning {
		t.Fatalf("findings: %+v", fs)
	}
	t.Log(fs[0].Message)
}
