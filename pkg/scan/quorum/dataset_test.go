package quorum_test

import (
	"bufio"
	"context"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/storectl/storectl/internal/testutil"
	"github.com/storectl/storectl/pkg/scan"
	"github.com/storectl/storectl/pkg/scan/quorum"
)

func TestMain(m *testing.M) {
	code := m.Run()
	testutil.RemoveShared()
	os.Exit(code)
}

// dataset is a real broker's data dir with what the broker did after a
// restart of a fresh copy.
type dataset struct {
	name    string
	node    string // the node dir
	results string // results/<N>
}

// qq310Datasets are the datasets made with Debian's rabbitmq-server
// 3.10.8 (testdata/rabbitmq-3.10-qq/tools/make.sh).
func qq310Datasets(t testing.TB) []dataset {
	var out []dataset
	for _, n := range []string{"R1", "R2", "R3"} {
		d := testutil.SharedUntar(t, testutil.Testdata("rabbitmq-3.10-qq", "datasets", n+".tar.gz"))
		out = append(out, dataset{name: n, node: filepath.Join(d, "rmq310@localhost"),
			results: testutil.Testdata("rabbitmq-3.10-qq", "results", n)})
	}
	return out
}

func qqDatasets(t testing.TB) []dataset {
	var out []dataset
	for _, n := range []string{"Q1", "Q2", "Q3"} {
		d := testutil.SharedUntar(t, testutil.Testdata("rabbitmq-4.0-qq-stream", "datasets", n+".tar.gz"))
		out = append(out, dataset{name: n, node: filepath.Join(d, "rmq40@localhost"),
			results: testutil.Testdata("rabbitmq-4.0-qq-stream", "results", n)})
	}
	return out
}

// listQueues reads restart/list_queues.tsv: quorum queue -> messages.
func listQueues(t testing.TB, results string) map[string]int {
	f, err := os.Open(filepath.Join(results, "restart", "list_queues.tsv"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]int{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		cols := strings.Split(sc.Text(), "\t")
		if len(cols) < 3 || cols[1] != "quorum" {
			continue
		}
		n, err := strconv.Atoi(cols[2])
		if err != nil {
			t.Fatal(err)
		}
		out[cols[0]] = n
	}
	return out
}

type delivery struct {
	MessageID string `json:"message_id"`
	SHA256    string `json:"sha256"`
	Size      int64  `json:"size"`
}

func verifyDir(t testing.TB, node string) *quorum.Result {
	t.Helper()
	res, err := quorum.Scan(context.Background(), quorum.Config{Root: node, Replay: true}, scan.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Incomplete {
		t.Fatalf("incomplete: %v", res.Errors)
	}
	return res
}

// TestPredictDatasets: the next-start prediction of every quorum queue
// of Q1-Q3 equals the restarted broker's list_queues, and the predicted
// messages equal what the restarted broker delivered (message id and
// sha256 of the body).
func TestPredictDatasets(t *testing.T) {
	for _, ds := range append(qqDatasets(t), qq310Datasets(t)...) {
		want := listQueues(t, ds.results)
		failed := restartFailures(t, ds.results)
		res := verifyDir(t, ds.node)
		seen := 0
		for _, s := range res.Systems {
			if s.System != quorum.SystemQuorum {
				continue
			}
			for _, r := range s.Replicas {
				p := r.Prediction()
				q := p.Queue
				n, ok := want[q.Queue]
				if !ok {
					t.Errorf("%s: queue %q not in list_queues", ds.name, q.Queue)
					continue
				}
				seen++
				if reason, ok := failed[q.Queue]; ok {
					// the restarted broker could not start this queue (its
					// log says why): compare with what the workload left in
					// it, by the client's own records
					gt := groundTruth(t, ds.results, q.Queue)
					if q.Keep != len(gt) {
						t.Errorf("%s %s: predicted %d, the workload left %d", ds.name, q.Queue, q.Keep, len(gt))
					}
					for lm := range p.Live() {
						if !gt[lm.MessageID] {
							t.Errorf("%s %s: predicted %s, which the workload settled", ds.name, q.Queue, lm.MessageID)
							break
						}
					}
					t.Logf("%s %s: predicted %d = what the workload left; the restarted broker failed to start the queue: %s", ds.name, q.Queue, q.Keep, reason)
					continue
				}
				f := q.NextStart
				if f.State != quorum.StartOK || (!f.Exact && (n < f.Min || n > f.Max)) {
					t.Errorf("%s %s: next start %+v, the broker had %d", ds.name, q.Queue, f, n)
				}
				if q.Keep != n {
					t.Errorf("%s %s: predicted %d messages, the restarted broker had %d (%+v)", ds.name, q.Queue, q.Keep, n, q.NextStart)
				}
				dump := readDump(t, ds.results, q.Queue)
				wantIDs := map[string]string{}
				for _, d := range dump {
					wantIDs[d.MessageID] = d.SHA256
				}
				gotIDs := map[string]string{}
				for lm := range p.Live() {
					gotIDs[lm.MessageID] = lm.SHA256
				}
				var missing, extra, badSHA []string
				for id, sha := range wantIDs {
					g, ok := gotIDs[id]
					switch {
					case !ok:
						missing = append(missing, id)
					case g != sha:
						badSHA = append(badSHA, id)
					}
				}
				for id := range gotIDs {
					if _, ok := wantIDs[id]; !ok {
						extra = append(extra, id)
					}
				}
				sort.Strings(missing)
				sort.Strings(extra)
				if len(missing)+len(extra)+len(badSHA) > 0 || len(dump) != p.LiveCount() {
					t.Errorf("%s %s: %d predicted, %d delivered; missing %d %v, extra %d %v, sha mismatch %v",
						ds.name, q.Queue, p.LiveCount(), len(dump), len(missing), head(missing), len(extra), head(extra), badSHA)
				}
				t.Logf("%s %s: predicted %d = list_queues %d, %d messages equal the restart dump (id, sha256)", ds.name, q.Queue, q.Keep, n, len(dump))
			}
		}
		if seen != len(want) {
			t.Errorf("%s: %d quorum queues predicted, list_queues has %d", ds.name, seen, len(want))
		}
	}
}

func head(s []string) []string {
	if len(s) > 5 {
		return s[:5]
	}
	return s
}

// readDump reads restart/dump-<queue>.jsonl[.gz].
func readDump(t testing.TB, results, queue string) []delivery {
	p := filepath.Join(results, "restart", "dump-"+queue+".jsonl")
	if _, err := os.Stat(p); err != nil {
		p += ".gz"
	}
	return testutil.ReadJSONL[delivery](t, p)
}

// restartFailures reads the queues the restarted broker logged as not
// restarted (restart/recovery-log.txt): queue -> the log line.
func restartFailures(t testing.TB, results string) map[string]string {
	out := map[string]string{}
	b, err := os.ReadFile(filepath.Join(results, "restart", "recovery-log.txt"))
	if err != nil {
		return out
	}
	for _, l := range strings.Split(string(b), "\n") {
		_, rest, ok := strings.Cut(l, "recover: quorum queue '%2F_")
		if !ok {
			continue
		}
		name, why, _ := strings.Cut(rest, "' could not be restarted ")
		out[name] = why
	}
	return out
}

// groundTruth is what a 3.10.8 workload left in queue q by the client's
// records: every confirmed message minus those whose last delivery was
// acked or nack-discarded.
func groundTruth(t testing.TB, results, q string) map[string]bool {
	type line struct {
		MessageID string `json:"message_id"`
		Ack       *bool  `json:"ack"`
		Action    string `json:"action"`
	}
	live := map[string]bool{}
	w := filepath.Join(results, "workload")
	for _, pat := range []string{"publish-" + q + "*.jsonl*", "get-" + q + "*.jsonl*", "consume-" + q + "*.jsonl*"} {
		paths, _ := filepath.Glob(filepath.Join(w, pat))
		sort.Strings(paths)
		for _, p := range paths {
			for _, l := range testutil.ReadJSONL[line](t, p) {
				switch {
				case l.Ack != nil && *l.Ack:
					live[l.MessageID] = true
				case l.Action == "ack" || l.Action == "ack_redelivered" || l.Action == "nack_discard":
					delete(live, l.MessageID)
				}
			}
		}
	}
	return live
}
