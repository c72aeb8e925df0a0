package rabbitmq

import (
	"context"
	"encoding/hex"
	"fmt"
	"path/filepath"
	"sort"
	"strconv"
	"testing"

	"github.com/storectl/storectl/internal/testutil"
	rfmt "github.com/storectl/storectl/pkg/format/rabbitmq"
	"github.com/storectl/storectl/pkg/scan"
)

// dumpRec is one line of restart/dump.jsonl: a message the restarted
// broker delivered.
type dumpRec struct {
	MessageID string `json:"message_id"`
	Queue     string `json:"queue"`
	SHA256    string `json:"sha256"`
	Size      int64  `json:"size"`
}

func vhostOf(root, node string) string {
	return filepath.Join(root, node, "msg_stores", "vhosts", vhostHash)
}

// verifyDir runs VerifyVHost and asserts it changed no byte.
func verifyDir(t *testing.T, root, dir, ver string) *VHostVerify {
	t.Helper()
	before := testutil.TreeHash(t, dir)
	vv, err := VerifyVHost(context.Background(), root, dir, VHostOptions{BrokerVersion: ver})
	if err != nil {
		t.Fatal(err)
	}
	testutil.SameTree(t, before, testutil.TreeHash(t, dir))
	return vv
}

// amqpOf decodes the message a kept entry delivers: from its .rdq record,
// or from the body held by the index (v1 embedded, v2 .qs).
func amqpOf(t *testing.T, root string, ef EntryFate, files map[string][]byte) string {
	t.Helper()
	body := rfmt.TrimQSPadding(ef.Entry.Body)
	if r := ef.Record; r != nil {
		b, ok := files[r.Path]
		if !ok {
			b = readFile(t, filepath.Join(root, r.Path))
			files[r.Path] = b
		}
		body = b[r.Offset+rfmt.RDQHeaderLen : r.End()-1]
	}
	m, err := rfmt.DecodeMessage(body, 0)
	if err != nil || m.Properties == nil || m.Properties.MessageID == nil {
		t.Fatalf("entry seq %d (%s): cannot decode its message: %v", ef.Entry.SeqID, ef.Entry.Location, err)
	}
	return fmt.Sprintf("%s %d %s", *m.Properties.MessageID, m.PayloadSize, hex.EncodeToString(m.PayloadSHA256[:]))
}

// TestVerifyDatasetsPredictRestart: on every dataset the predicted keep
// count per queue equals the restarted broker's list_queues, and the
// messages kept (AMQP id, payload size and sha256) equal what it delivered
// (dump.jsonl). The 3.10 fixtures give no warning or error; the 4.0 ones
// only info (generation-1 stops in #mc{} files, unreferenced records).
func TestVerifyDatasetsPredictRestart(t *testing.T) {
	for _, d := range datasets {
		t.Run(d.kind+"/"+d.name, func(t *testing.T) {
			root := testutil.Untar(t, testutil.Testdata(d.kind, "datasets", d.name+".tar.gz"))
			dir := vhostOf(root, d.node)
			vv := verifyDir(t, root, dir, "")
			oracle := testutil.Testdata(d.kind, "results", d.name, "restart")
			want := map[string]int{}
			for _, l := range readTSV(t, filepath.Join(oracle, "list_queues.tsv"))[1:] {
				n, err := strconv.Atoi(l[1])
				if err != nil {
					t.Fatal(err)
				}
				want[l[0]] = n
			}
			delivered := map[string][]string{}
			for _, m := range testutil.ReadJSONLIfExists[dumpRec](t, filepath.Join(oracle, "dump.jsonl")) {
				delivered[m.Queue] = append(delivered[m.Queue], fmt.Sprintf("%s %d %s", m.MessageID, m.Size, m.SHA256))
			}
			if len(vv.Queues) != len(want) {
				t.Errorf("%d queues predicted, broker has %d", len(vv.Queues), len(want))
			}
			files := map[string][]byte{}
			compared := 0
			for _, q := range vv.Queues {
				n, ok := want[q.Queue.Queue]
				if !ok || q.Keep != n || q.Keep+q.Drop != q.Queue.Entries {
					t.Errorf("queue %s: keep %d drop %d of %d entries, broker kept %d (%v)", q.Queue.Queue, q.Keep, q.Drop, q.Queue.Entries, n, ok)
				}
				var kept []string
				for _, ef := range q.Entries {
					if ef.Keep {
						kept = append(kept, amqpOf(t, root, ef, files))
					}
				}
				got, exp := sortedCopy(kept), sortedCopy(delivered[q.Queue.Queue])
				if fmt.Sprint(got) != fmt.Sprint(exp) {
					t.Errorf("queue %s: kept messages differ from the broker's dump:\n got %v\nwant %v", q.Queue.Queue, got, exp)
				}
				compared += len(exp)
				for _, k := range atRiskKeys {
					if _, ok := q.AtRisk[k]; !ok {
						t.Errorf("queue %s: at_risk lacks %s", q.Queue.Queue, k)
					}
				}
			}
			t.Logf("%d queues, %d delivered messages compared; state %s; %s", len(vv.Queues), compared, vv.State, summarize(vv.Findings))
			wantState := StateUnclean
			if d.name == "clean-shutdown" {
				wantState = StateClean
			}
			if vv.State != wantState {
				t.Errorf("state %s, want %s (%v)", vv.State, wantState, vv.StateFrom)
			}
			if d.name != "crash-mid-write-confirmed" {
				for _, f := range vv.Findings {
					if f.Severity >= scan.Warning {
						t.Errorf("clean fixture: %s %s at %s@%d: %s", f.Severity, f.Code, f.Path, f.Offset, f.Message)
					}
				}
			}
		})
	}
}

// TestVerifyResult: the Verify entry point returns the queue records, the
// layout (state, index version, versions from body terms) and, on
// crash-mid-write-confirmed, the two lost messages at their journal entries.
func TestVerifyResult(t *testing.T) {
	cases := []struct {
		kind, name, node, state, cq, versions string
	}{
		{"rabbitmq", "clean-shutdown", "rmqfix@localhost", StateClean, "v1", "3.x (basic_message)"},
		{"rabbitmq", "crash-cqv2", "rmqfix@localhost", StateUnclean, "v2", "3.x (basic_message)"},
		{"rabbitmq", "crash-mid-write-confirmed", "rmqfix@localhost", StateUnclean, "v1", "3.x (basic_message)"},
		{"rabbitmq-4.0", "clean-shutdown", "rmq40@localhost", StateClean, "v2", "3.13+/4.x (mc)"},
	}
	for _, c := range cases {
		root := testutil.Untar(t, testutil.Testdata(c.kind, "datasets", c.name+".tar.gz"))
		res, err := Verify(context.Background(), Config{Root: root, VHostDirs: []string{vhostOf(root, c.node)}}, scan.Options{})
		if err != nil || res.Incomplete {
			t.Fatalf("%s: %v %v", c.name, err, res.Errors)
		}
		sd := res.Layout["shutdown"].(map[string]any)
		if sd["state"] != c.state || res.Layout["cq_index"] != c.cq || fmt.Sprint(res.Layout["versions"]) != "["+c.versions+"]" {
			t.Errorf("%s: layout %v", c.name, res.Layout)
		}
		if (c.state == StateClean) != (sd["client_refs"] != nil) {
			t.Errorf("%s: client_refs %v", c.name, sd["client_refs"])
		}
		keep := 0
		for _, q := range res.Queues {
			keep += q.Keep
		}
		broker := 0
		for _, l := range readTSV(t, testutil.Testdata(c.kind, "results", c.name, "restart", "list_queues.tsv"))[1:] {
			n, _ := strconv.Atoi(l[1])
			broker += n
		}
		missing := codes(res.Findings, CodeMessageMissing)
		if keep != broker || len(res.Files) == 0 || (c.name == "crash-mid-write-confirmed") != (len(missing) == 2) {
			t.Errorf("%s: keep %d, broker %d, %d files, %d message-missing", c.name, keep, broker, len(res.Files), len(missing))
		}
		for _, f := range missing {
			if filepath.Base(f.Path) != "journal.jif" || f.Offset <= 0 {
				t.Errorf("%s: message-missing at %s@%d, want a journal.jif entry", c.name, f.Path, f.Offset)
			}
		}
		t.Logf("%s: %d queues keep %d; %s", c.name, len(res.Queues), keep, summarize(res.Findings))
	}
}

func sortedCopy(s []string) []string {
	out := append([]string(nil), s...)
	sort.Strings(out)
	return out
}

func summarize(fs []scan.Finding) string {
	n := map[string]int{}
	for _, f := range fs {
		n[f.Code+"/"+f.Severity.String()]++
	}
	return fmt.Sprint(n)
}
