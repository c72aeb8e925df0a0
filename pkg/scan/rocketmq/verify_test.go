package rocketmq

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"testing"

	"github.com/storectl/storectl/internal/testutil"
	rmq "github.com/storectl/storectl/pkg/format/rocketmq"
	"github.com/storectl/storectl/pkg/scan"
)

// fixtureCQFileSize is mappedFileSizeConsumeQueue of every fixture
// (testdata/rocketmq/README.md: 50 units of 20 bytes).
const fixtureCQFileSize = 1000

// verifyDataset unpacks a fixture, applies damage and runs Verify,
// checking that verify changed nothing on disk.
func verifyDataset(t *testing.T, ds string, damage func(root string)) (string, *scan.Result) {
	t.Helper()
	dir := testutil.Untar(t, testutil.Testdata("rocketmq", ds+".tar.gz"))
	root := filepath.Join(dir, "store")
	if damage != nil {
		damage(root)
	}
	return root, verifyRoot(t, root, VerifyConfig{Config: Config{Root: root}})
}

func verifyRoot(t *testing.T, root string, cfg VerifyConfig) *scan.Result {
	t.Helper()
	before := testutil.TreeHash(t, root)
	res, err := Verify(context.Background(), cfg, scan.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Incomplete {
		t.Fatalf("incomplete: %v", res.Errors)
	}
	testutil.SameTree(t, before, testutil.TreeHash(t, root))
	return res
}

// cqLine is a raw_consume_queue (decode) or consume_queue (recover) line.
type cqLine struct {
	Kind    string    `json:"kind"`
	Phase   string    `json:"phase"`
	Topic   string    `json:"topic"`
	QueueID int32     `json:"queue_id"`
	Entries [][]int64 `json:"entries"` // [cq_index, phyOffset, size, tagsCode]
}

// readCQOracle returns the consume queue entries of one oracle file:
// kind raw_consume_queue (decode.jsonl) or consume_queue with a phase.
func readCQOracle(t *testing.T, name, kind, phase string) map[queueKey][][]int64 {
	t.Helper()
	f, err := os.Open(testutil.Testdata("rocketmq", name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[queueKey][][]int64{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		var l cqLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatal(err)
		}
		if l.Kind == kind && l.Phase == phase {
			out[queueKey{l.Topic, l.QueueID}] = l.Entries
		}
	}
	return out
}

// unitPlace is where unit idx of a queue lives in the fixture layout.
func unitPlace(k queueKey, idx int64) (string, int64) {
	b := idx * rmq.CQUnitSize
	return fmt.Sprintf("consumequeue/%s/%d/%s", k.topic, k.queueID, rmq.FormatFileName(b/fixtureCQFileSize*fixtureCQFileSize)), b % fixtureCQFileSize
}

// recoverStartFile is the commitlog file the real broker's recovery
// started from, from its log.
func recoverStartFile(t *testing.T, ds string) string {
	t.Helper()
	b, err := os.ReadFile(testutil.Testdata("rocketmq", ds+".recover.log"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`recover from this mapped file \S*/(\d{20})`).FindSubmatch(b)
	if m == nil {
		t.Fatalf("%s.recover.log: no start file line", ds)
	}
	return string(m[1])
}

// warnings returns the findings of res of severity Warning or worse.
func warnings(res *scan.Result) []scan.Finding {
	var out []scan.Finding
	for _, f := range res.Findings {
		if f.Severity >= scan.Warning {
			out = append(out, f)
		}
	}
	return out
}

func findCode(res *scan.Result, code string) []scan.Finding {
	var out []scan.Finding
	for _, f := range res.Findings {
		if f.Code == code {
			out = append(out, f)
		}
	}
	return out
}

// TestVerifyClean: clean shutdowns give no warning or error (exit 0 with
// --fail-on warning), and the layout is that of the fixture README.
func TestVerifyClean(t *testing.T) {
	for _, c := range []struct{ ds, version string }{
		{"rmq497-a-clean", "4.x"}, {"rmq533-a-clean", "5.x"}, {"rmq533-e-propcrc-clean", "5.x"},
	} {
		t.Run(c.ds, func(t *testing.T) {
			t.Parallel()
			_, res := verifyDataset(t, c.ds, nil)
			for _, f := range warnings(res) {
				t.Errorf("unexpected %s", fmtFinding(f))
			}
			l := res.Layout
			if l["cq_file_size"] != int64(fixtureCQFileSize) || l["index_slots"] != int64(100) || l["index_entries"] != int64(400) ||
				l["store_version"] != c.version || l["abort"] != false {
				t.Errorf("layout = %v", l)
			}
			if len(findCode(res, CodeRecoveryPlan)) != 1 {
				t.Errorf("no recovery plan finding")
			}
			want := recoverMax(t, c.ds+".recover.jsonl")
			if *res.RecoveryEnd != want {
				t.Errorf("recovery end %d, broker %d", *res.RecoveryEnd, want)
			}
			// Every unit the broker kept was checked against its record.
			n := 0
			for _, e := range readCQOracle(t, c.ds+".recover.jsonl", "consume_queue", "after_load") {
				n += len(e)
			}
			if ie := oracleIndexEntries(t, c.ds); l["index_entries_linked"] != ie {
				t.Errorf("%v index entries linked, broker's headers count %d", l["index_entries_linked"], ie)
			}
			if l["cq_units_linked"] != n {
				t.Errorf("%v units linked to records, broker holds %d", l["cq_units_linked"], n)
			}
			t.Logf("%s: %d consume queue units linked (broker: %d), %v index entries linked, %d findings (all info)",
				c.ds, l["cq_units_linked"], n, l["index_entries_linked"], len(res.Findings))
		})
	}
}

// TestVerifyAbnormal: rmq533-b-abnormal was SIGKILLed after a flush; the
// real recovery kept all 305 messages and its consume queues after load
// are exactly those on disk, so verify must report no warning or error,
// only the unclean shutdown, starting where the real broker started.
func TestVerifyAbnormal(t *testing.T) {
	ds := "rmq533-b-abnormal"
	_, res := verifyDataset(t, ds, nil)
	for _, f := range warnings(res) {
		t.Errorf("unexpected %s", fmtFinding(f))
	}
	raw := readCQOracle(t, ds+".decode.jsonl", "raw_consume_queue", "")
	kept := readCQOracle(t, ds+".recover.jsonl", "consume_queue", "after_load")
	for k, e := range raw {
		if len(kept[k]) != len(e) {
			t.Fatalf("oracle: recovery changed %v (%d -> %d units); this test's premise is wrong", k, len(e), len(kept[k]))
		}
	}
	u := findCode(res, CodeUncleanShutdown)
	if len(u) != 1 {
		t.Fatalf("unclean shutdown findings: %v", u)
	}
	if got, want := u[0].Details["start_file"], recoverStartFile(t, ds); got != want {
		t.Errorf("abnormal recovery start file %v, broker started from %s", got, want)
	}
	if want := recoverMax(t, ds+".recover.jsonl"); u[0].Details["recovery_end"] != want {
		t.Errorf("recovery end %v, broker %d", u[0].Details["recovery_end"], want)
	}
}

// TestVerifyStale: the 13 stale copies are stale-record errors at their
// file offsets, the recovery end is the fixed broker's and the end the
// unpatched broker reaches is the buggy oracle's; the consume queues and
// the index were not polluted (the broker's log says so), so nothing else.
func TestVerifyStale(t *testing.T) {
	for _, ds := range []string{"rmq497-c-stale", "rmq533-c-stale"} {
		t.Run(ds, func(t *testing.T) {
			t.Parallel()
			_, res := verifyDataset(t, ds, nil)
			inj, _ := readInject(t, ds)
			want := map[int64]bool{}
			for _, p := range inj.CopiedStoredPhy {
				want[inj.WritePos+p] = true
			}
			for _, f := range warnings(res) {
				if f.Code != CodeStaleRecord || f.Path != "commitlog/"+inj.File || !want[f.Offset] {
					t.Errorf("unexpected %s", fmtFinding(f))
				}
				delete(want, f.Offset)
			}
			if len(want) != 0 {
				t.Errorf("stale records not reported: %v", want)
			}
			u := findCode(res, CodeUncleanShutdown)
			if len(u) != 1 {
				t.Fatalf("unclean shutdown findings: %v", u)
			}
			d := u[0].Details
			if fixed := recoverMax(t, ds+".fixed-recovery.recover.jsonl"); d["recovery_end"] != fixed {
				t.Errorf("recovery end %v, fixed broker %d", d["recovery_end"], fixed)
			}
			if buggy := recoverMax(t, ds+".recover.jsonl"); d["recovery_end_without_fix"] != buggy || d["stale_records_accepted"] != len(inj.CopiedStoredPhy) {
				t.Errorf("without fix: end %v, %v stale; unpatched broker %d, %d injected", d["recovery_end_without_fix"],
					d["stale_records_accepted"], buggy, len(inj.CopiedStoredPhy))
			}
			if got, want := d["start_file"], recoverStartFile(t, ds); got != want {
				t.Errorf("start file %v, broker %s", got, want)
			}
		})
	}
}

// TestVerifyTornCRC: the body-CRC error, and as beyond-end exactly the
// consume queue units the real recovery dropped (decode's raw units
// minus recover's after_load units).
func TestVerifyTornCRC(t *testing.T) {
	ds := "rmq533-d-torn-crc"
	_, res := verifyDataset(t, ds, nil)
	inj, _ := readInject(t, ds)
	raw := readCQOracle(t, ds+".decode.jsonl", "raw_consume_queue", "")
	kept := readCQOracle(t, ds+".recover.jsonl", "consume_queue", "after_load")
	want := map[string]bool{}
	for k, e := range raw {
		for _, u := range e[len(kept[k]):] {
			p, off := unitPlace(k, u[0])
			want[fmt.Sprintf("%s@%d", p, off)] = true
		}
	}
	if len(want) != 1 {
		t.Fatalf("oracle: %d dropped units, README says 1 (TopicA/3)", len(want))
	}
	crc := 0
	for _, f := range warnings(res) {
		key := fmt.Sprintf("%s@%d", f.Path, f.Offset)
		switch {
		case f.Code == CodeBodyCRC && f.Path == "commitlog/"+inj.File && f.Offset+786432 == inj.LastMsgPhyOffset:
			crc++
		case f.Code == CodeCQBeyondEnd && want[key] && f.Repair == scan.RepairTruncate:
			delete(want, key)
		default:
			t.Errorf("unexpected %s", fmtFinding(f))
		}
	}
	if crc != 1 || len(want) != 0 {
		t.Errorf("body-crc findings %d; dropped units not reported: %v", crc, want)
	}
	// The index entries of the torn message: info, because the real
	// broker deleted that index file at load.
	ib := findCode(res, CodeIndexBeyondEnd)
	if len(ib) != 1 || ib[0].Severity != scan.Info {
		t.Fatalf("index beyond-end: %v", ib)
	}
	after := indexFilesAfterLoad(t, ds)
	if after[filepath.Base(ib[0].Path)] {
		t.Errorf("broker kept %s, verify said it deletes it", ib[0].Path)
	}
}

func indexFilesAfterLoad(t *testing.T, ds string) map[string]bool {
	b, err := os.ReadFile(testutil.Testdata("rocketmq", ds+".recover.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		var l struct {
			Kind, Phase string
			Files       []string
		}
		if json.Unmarshal(sc.Bytes(), &l) == nil && l.Kind == "index_files" && l.Phase == "after_load" {
			out := map[string]bool{}
			for _, f := range l.Files {
				out[f] = true
			}
			return out
		}
	}
	t.Fatal("no index_files line")
	return nil
}

// oracleIndexEntries sums indexCount-1 over the broker's index headers.
func oracleIndexEntries(t *testing.T, ds string) int {
	b, err := os.ReadFile(testutil.Testdata("rocketmq", ds+".decode.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, line := range bytes.Split(b, []byte("\n")) {
		var h struct {
			Kind       string `json:"kind"`
			IndexCount int    `json:"index_count"`
		}
		if json.Unmarshal(line, &h) == nil && h.Kind == "index_header" {
			n += h.IndexCount - 1
		}
	}
	return n
}

func fmtFinding(f scan.Finding) string {
	return fmt.Sprintf("%s %s %s@%d exp=%q act=%q ev=%v: %s", f.Severity, f.Code, f.Path, f.Offset, f.Expected, f.Actual, f.Evidence, f.Message)
}

// sortedKeys is for stable failure messages.
func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
