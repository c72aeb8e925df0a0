package rabbitmq

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/storectl/storectl/internal/testutil"
)

// decoded is one line of scan-decoded.jsonl (3.10: body_*, 4.0: payload_*).
type decoded struct {
	File          string   `json:"file"`
	MsgID         string   `json:"msg_id"`
	Offset        int64    `json:"offset"`
	AMQPMessageID string   `json:"amqp_message_id"`
	RoutingKeys   []string `json:"routing_keys"`
	Exchange      *string  `json:"exchange"`
	BodySize      *int64   `json:"body_size"`
	BodySHA256    string   `json:"body_sha256"`
	PayloadSize   *int64   `json:"payload_size"`
	PayloadSHA256 string   `json:"payload_sha256"`
}

var datasets = []struct {
	kind, name, node string
	files, records   int // oracle totals over the persistent files, so a dataset cannot drop out silently
}{
	{"rabbitmq", "clean-shutdown", "rmqfix@localhost", 29, 176},
	{"rabbitmq", "crash", "rmqfix@localhost", 28, 171},
	{"rabbitmq", "crash-cqv2", "rmqfix@localhost", 29, 177},
	{"rabbitmq", "crash-mid-write-confirmed", "rmqfix@localhost", 549, 2253},
	{"rabbitmq-4.0", "clean-shutdown", "rmq40@localhost", 45, 423},
	{"rabbitmq-4.0", "crash", "rmq40@localhost", 45, 406},
}

// TestDatasetsMatchOracles: per .rdq, storectl's records (referenced and
// unreferenced) equal the real scanner's, the decoded fields equal
// scan-decoded.jsonl, 4.0's referenced set equals scan-refs/, and no
// misread or off-by-nine hazard is reported on real data.
func TestDatasetsMatchOracles(t *testing.T) {
	for _, d := range datasets {
		t.Run(d.kind+"/"+d.name, func(t *testing.T) {
			s := scanDataset(t, d.kind, d.name, d.node)
			res := testutil.Testdata(d.kind, "results", d.name)
			files, compared, refsCompared := 0, 0, 0
			byPos := map[string]RecordJSON{}
			for _, r := range s.recs {
				byPos[fmt.Sprint(filepath.Base(r.Path), "@", r.Offset)] = r
			}
			for _, f := range s.v.Files {
				if f.Transient {
					continue
				}
				files++
				name := "msg_store_persistent-" + strconv.FormatInt(f.Number, 10) + ".rdq.jsonl"
				want := testutil.ReadJSONLIfExists[oracleRec](t, filepath.Join(res, "scan", name))
				compared += compareFile(t, d.kind, f, want)
				if d.kind == "rabbitmq-4.0" {
					refs := testutil.ReadJSONLIfExists[oracleRec](t, filepath.Join(res, "scan-refs", name))
					var got []oracleRec
					for _, r := range f.Records {
						if r.Status == StatusReferenced {
							got = append(got, oracleRec{r.ID(), r.Offset, r.TotalSize})
						}
					}
					if fmt.Sprint(got) != fmt.Sprint(refs) {
						t.Errorf("%s: referenced %v, scan-refs %v", f.Path, got, refs)
					}
					refsCompared += len(refs)
				}
			}
			dec := testutil.ReadJSONLIfExists[decoded](t, filepath.Join(res, "scan-decoded.jsonl"))
			for _, o := range dec {
				r, ok := byPos[fmt.Sprint(filepath.Base(strings.ReplaceAll(o.File, "msg_store_persistent-", "")), "@", o.Offset)]
				if !ok || r.MsgID != o.MsgID {
					t.Errorf("decoded %s@%d %s: no such record", o.File, o.Offset, o.MsgID)
					continue
				}
				size, sha := o.PayloadSize, o.PayloadSHA256
				if o.BodySize != nil {
					size, sha = o.BodySize, o.BodySHA256
				}
				if r.MessageID != o.AMQPMessageID || fmt.Sprint(r.RoutingKeys) != fmt.Sprint(o.RoutingKeys) ||
					size == nil || r.PayloadSize != *size || r.PayloadSHA256 != sha ||
					(o.Exchange != nil && *o.Exchange != r.Exchange) {
					t.Errorf("decoded %s@%d: got %+v, oracle %+v", o.File, o.Offset, r, o)
				}
			}
			checkLost(t, s, res)
			for _, c := range []string{CodeZeroHoleMisread, CodeOffByNine, CodeIndexMismatch, CodeScannerCrash} {
				if fs := codes(s.v.Findings, c); len(fs) > 0 {
					t.Errorf("%d %s findings on real data, first %+v", len(fs), c, fs[0])
				}
			}
			t.Logf("%d files, %d oracle records compared, %d decoded, %d scan-refs", files, compared, len(dec), refsCompared)
			if files != d.files || compared != d.records || len(dec) != d.records {
				t.Errorf("compared %d files / %d records / %d decoded, want %d / %d", files, compared, len(dec), d.files, d.records)
			}
		})
	}
}

// compareFile checks one file's records against the oracle. The 3.10
// scanner stops at the first bad frame: records storectl finds beyond it
// must be victims of the generation-1 hazard at that place, with the
// reason asserted here; 4.0's scanner (scan_file_for_valid_messages/1)
// must match exactly.
func compareFile(t *testing.T, kind string, f *FileScan, want []oracleRec) int {
	t.Helper()
	got := map[int64]*Record{}
	for _, r := range f.Records {
		got[r.Offset] = r
	}
	for _, w := range want {
		r := got[w.Offset]
		if r == nil || r.ID() != w.MsgID || r.TotalSize != w.TotalSize {
			t.Errorf("%s: oracle record %+v not found (got %+v)", f.Path, w, r)
		}
		delete(got, w.Offset)
	}
	var extra []string
	for off, r := range got {
		why := explainExtra(f, off)
		if kind != "rabbitmq" || why == "" {
			t.Errorf("%s: record %s@%d not in the oracle (%q)", f.Path, r.ID(), off, why)
		}
		extra = append(extra, fmt.Sprintf("%d: %s", off, why))
	}
	sort.Strings(extra)
	if len(extra) > 0 {
		t.Logf("%s: storectl finds more than the 3.10 scanner: %v", f.Path, extra)
	}
	return len(want)
}

// explainExtra says why the 3.10 scanner misses the record at off: it is
// a victim of a generation-1 stop ("after a zero word", "after an
// oversize length", ...) or of a crash.
func explainExtra(f *FileScan, off int64) string {
	for _, h := range f.Hazards {
		for _, v := range h.Victims {
			if v.Offset != off {
				continue
			}
			switch h.Code {
			case CodeGen1Stop:
				return fmt.Sprintf("after a %v at %d", h.Details["reason"], h.Offset)
			case CodeScannerCrash:
				return fmt.Sprintf("scanner crash at %d", h.Offset)
			}
		}
	}
	return ""
}

// checkLost: referenced ids found in no .rdq must be exactly what the
// restarted broker dropped: per queue, live index entries minus lost
// references equals restart/list_queues.tsv. In crash-mid-write-confirmed
// one lost id is the record cut by the torn tail of the current file.
func checkLost(t *testing.T, s scanned, res string) {
	t.Helper()
	lost := map[string]bool{}
	for _, id := range s.v.Lost {
		lost[id] = true
	}
	if len(codes(s.v.Findings, CodeMessageMissing)) > 0 != (len(lost) > 0) {
		t.Errorf("message-missing findings disagree with Lost %v", s.v.Lost)
	}
	want := map[string]int{}
	for _, l := range readTSV(t, filepath.Join(res, "restart", "list_queues.tsv")) {
		n, _ := strconv.Atoi(l[1])
		want[l[0]] = n
	}
	for _, q := range s.v.Queues.Queues {
		full, err := ReadQueueDir(q.Dir, s.v.Queues.SegmentEntryCount) // the scan read only the references
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, e := range full.Kept() {
			if e.Location != 1 || !lost[e.MsgID] { // 1 = shared store
				n++
			}
		}
		if n != want[q.Name.Name] {
			t.Errorf("queue %s: %d entries keep their message, broker kept %d", q.Name.Name, n, want[q.Name.Name])
		}
	}
	for _, f := range s.v.Files {
		if f.Torn != nil && f.Torn.Length >= 24 {
			b, err := os.ReadFile(f.Abs)
			if err != nil {
				t.Fatal(err)
			}
			id := fmt.Sprintf("%x", b[f.Torn.Offset+8:f.Torn.Offset+24])
			t.Logf("%s: torn tail at %d holds msg %s (lost: %v)", f.Path, f.Torn.Offset, id, lost[id])
		}
	}
	if len(lost) > 0 {
		t.Logf("lost (referenced, in no .rdq): %v", s.v.Lost)
	}
}

func readTSV(t *testing.T, path string) [][]string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out [][]string
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		out = append(out, strings.Split(l, "\t"))
	}
	return out
}
