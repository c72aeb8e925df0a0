package rabbitmq

import (
	"context"
	"encoding/binary"
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

// verifyDir runs Verify on one vhost dir and asserts it changed no byte.
func verifyDir(t *testing.T, root, dir, ver string) *scan.Result {
	t.Helper()
	before := testutil.TreeHash(t, dir)
	res, err := Verify(context.Background(), Config{Root: root, VHostDirs: []string{dir}, BrokerVersion: ver}, scan.Options{})
	if err != nil || res.Incomplete {
		t.Fatal(err, res.Errors)
	}
	testutil.SameTree(t, before, testutil.TreeHash(t, dir))
	return res
}

// entryFates decides every entry of every queue dir of a vhost with the
// prediction verify runs (predictQueue over the scan's id table), keeping
// the entries (verify drops them once counted) and, for a found record,
// its place, by queue dir: what a test checks against the restarted
// broker's messages.
func entryFates(t *testing.T, root, dir, version string) map[string][]EntryFate {
	t.Helper()
	ver, err := parseVersion(version)
	if err != nil {
		t.Fatal(err)
	}
	v, s, err := scanVHostKeep(context.Background(), root, dir, VHostOptions{BrokerVersion: version})
	if err != nil {
		t.Fatal(err)
	}
	defer s.free()
	clean := readCleanState(root, filepath.Join(dir, "msg_store_persistent")).state == StateClean
	vic, err := compactVictims(v, ver, s.seen)
	if err != nil {
		t.Fatal(err)
	}
	lookup := func(id [16]byte) *Record {
		e := s.seen.get(id)
		if e.set == 0 || e.path() == 0 {
			return nil
		}
		p := s.paths[e.path()-1]
		b := readFile(t, filepath.Join(root, p))
		off := int64(e.off)
		size := int64(binary.BigEndian.Uint64(b[off:])) + 9 // Size counts id and body: + the 8-byte field and the 0xFF
		return &Record{Path: p, Offset: off, TotalSize: size, MsgID: id, Status: StatusReferenced}
	}
	out := map[string][]EntryFate{}
	for _, qd := range v.Queues.Queues {
		full, err := ReadQueueDir(qd.Dir, v.Queues.SegmentEntryCount)
		if err != nil {
			t.Fatal(err)
		}
		qf := predictQueue(full, v.VHost, clean, lookup, vic, nil)
		out[qf.Dir] = qf.Entries
	}
	return out
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
			res := verifyDir(t, root, dir, "")
			fates := entryFates(t, root, dir, "")
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
			if len(res.Queues) != len(want) || len(fates) != len(want) {
				t.Errorf("%d queues predicted (%d decided entry by entry), broker has %d", len(res.Queues), len(fates), len(want))
			}
			files := map[string][]byte{}
			compared := 0
			for _, q := range res.Queues {
				n, ok := want[q.Queue]
				if !ok || q.Keep != n || q.Keep+q.Drop != q.Entries || len(fates[q.Dir]) != q.Entries {
					t.Errorf("queue %s: keep %d drop %d of %d entries (%d fates), broker kept %d (%v)", q.Queue, q.Keep, q.Drop, q.Entries, len(fates[q.Dir]), n, ok)
				}
				var kept []string
				for _, ef := range fates[q.Dir] {
					if ef.Keep {
						kept = append(kept, amqpOf(t, root, ef, files))
					}
				}
				got, exp := sortedCopy(kept), sortedCopy(delivered[q.Queue])
				if fmt.Sprint(got) != fmt.Sprint(exp) {
					t.Errorf("queue %s: kept messages differ from the broker's dump:\n got %v\nwant %v", q.Queue, got, exp)
				}
				compared += len(exp)
				for _, k := range atRiskKeys {
					if _, ok := q.AtRisk[k]; !ok {
						t.Errorf("queue %s: at_risk lacks %s", q.Queue, k)
					}
				}
			}
			state := res.Layout["shutdown"].(map[string]any)["state"]
			t.Logf("%d queues, %d delivered messages compared; state %s; %s", len(res.Queues), compared, state, summarize(res.Findings))
			wantState := StateUnclean
			if d.name == "clean-shutdown" {
				wantState = StateClean
			}
			if state != wantState {
				t.Errorf("state %s, want %s (%v)", state, wantState, res.Layout["shutdown"])
			}
			if d.name != "crash-mid-write-confirmed" {
				for _, f := range res.Findings {
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
