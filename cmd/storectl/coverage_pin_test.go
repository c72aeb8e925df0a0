package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/storectl/storectl/internal/testutil"
	"github.com/storectl/storectl/pkg/scan"
)

// TestCoverageToday pins what each command reads today, so that a change
// of the registry (pkg/scan/components.go) or of a command that stops
// reading a component fails here, not silently: TestCoverageVerdict checks
// that runs agree with the registry, this test checks the registry's
// answers themselves. When a scanner learns a component, move it to
// checked below.
//
//   - Q3 (RabbitMQ 4.0.5 node killed mid-flood: classic queue cq1, quorum
//     queue qq5, stream st5): scan and verify read quorum/, stream/ and
//     coordination/ beside the classic stores (checked: true, their files
//     in `file` lines; verify's queue lines give qq5 996 and st5 1096
//     messages, the counts the restarted broker reported), the metadata is
//     listed unchecked at info, and verify exits 0; salvage reads the same
//     (it exports quorum queues and streams) and exits 0.
//   - t1 (RocketMQ 5.3.3 timer store) with a compaction log added
//     (compaction/compactionLog/<topic>/<queue>/, which no scanner reads):
//     timerlog/ checked by every command, compaction/ a warning with its
//     bytes, exit 1, and the text report's first lines name it; the same
//     store without it verifies clean (exit 0).
func TestCoverageToday(t *testing.T) {
	q3 := filepath.Join(testutil.Untar(t, testutil.Testdata("rabbitmq-4.0-qq-stream", "datasets", "Q3.tar.gz")), "rmq40@localhost")
	t1 := filepath.Join(testutil.Untar(t, testutil.Testdata("rocketmq-5x", "rmq533-t1-clean.tar.gz")), "store")
	if code, _, errOut := runCLI(t, "verify", t1); code != exitOK {
		t.Fatalf("verify of t1 as shipped: exit %d\n%s", code, errOut)
	}
	// A compaction log: a few commitlog records copied into
	// compaction/compactionLog/TopicC/0/ (its format is the commitlog's).
	cl, err := os.ReadFile(filepath.Join(t1, "commitlog", "00000000000000000000"))
	if err != nil {
		t.Fatal(err)
	}
	compLog := filepath.Join(t1, "compaction", "compactionLog", "TopicC", "0")
	if err := os.MkdirAll(compLog, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(compLog, "00000000000000000000"), cl[:8192], 0o644); err != nil {
		t.Fatal(err)
	}

	type want struct {
		checked   []string         // components checked: true
		unchecked []string         // components checked: false
		warn      map[string]int64 // coverage warnings: component -> bytes (the component's)
		exit      int
		queues    map[string]float64 // verify's queue lines: queue -> keep
	}
	rabbitRead := []string{scan.RabbitMsgStore, scan.RabbitQueueIndex, scan.RabbitQuorum, scan.RabbitStream, scan.RabbitCoordination}
	rocketAll := []string{scan.RocketCommitLog, scan.RocketTimerLog, scan.RocketTimerWheel, scan.RocketTimerCheck}
	cases := []struct {
		name, dir, cmd string
		want           want
	}{
		{"Q3", q3, "verify", want{checked: rabbitRead, unchecked: []string{scan.RabbitMetadata}, exit: exitOK,
			queues: map[string]float64{"qq5": 996, "st5": 1096, "cq1": 997}}},
		{"Q3", q3, "scan", want{checked: rabbitRead, unchecked: []string{scan.RabbitMetadata}, exit: exitOK}},
		{"Q3", q3, "salvage", want{checked: rabbitRead, unchecked: []string{scan.RabbitMetadata}, exit: exitOK}},
		{"t1", t1, "verify", want{checked: append([]string{scan.RocketConsumeQueue, scan.RocketIndex, scan.RocketCheckpoint}, rocketAll...),
			unchecked: []string{scan.RocketCompaction}, warn: map[string]int64{scan.RocketCompaction: 8192}, exit: exitFindings}},
		{"t1", t1, "scan", want{checked: rocketAll, unchecked: []string{scan.RocketCompaction}, warn: map[string]int64{scan.RocketCompaction: 8192}, exit: exitFindings}},
		{"t1", t1, "salvage", want{checked: rocketAll, unchecked: []string{scan.RocketCompaction}, warn: map[string]int64{scan.RocketCompaction: 8192}, exit: exitFindings}},
	}
	for _, c := range cases {
		t.Run(c.name+"/"+c.cmd, func(t *testing.T) {
			args := []string{c.cmd, c.dir, "-o", "jsonl"}
			if c.cmd == "salvage" {
				args = append(args, "--out", filepath.Join(t.TempDir(), "out"))
			}
			code, out, errOut := runCLI(t, args...)
			if code != c.want.exit {
				t.Fatalf("exit %d, want %d\n%s", code, c.want.exit, errOut)
			}
			objs := jsonlObjects(t, out)
			comps := map[string]map[string]any{}
			for _, x := range objs[0]["components"].([]any) {
				m := x.(map[string]any)
				comps[m["name"].(string)] = m // msg-store has two (persistent, transient): both checked
			}
			for _, n := range c.want.checked {
				if m := comps[n]; m == nil || m["checked"] != true {
					t.Errorf("%s: %v, want checked", n, m)
				}
			}
			for _, n := range c.want.unchecked {
				if m := comps[n]; m == nil || m["checked"] != false {
					t.Errorf("%s: %v, want listed unchecked", n, m)
				}
			}
			warned := map[string]bool{}
			files := map[string]int{} // `file` lines per top dir
			for _, o := range objs {
				switch {
				case o["type"] == "file":
					files[strings.SplitN(o["path"].(string), "/", 2)[0]]++
				case o["type"] == "finding" && strings.HasSuffix(o["code"].(string), ".coverage.unchecked"):
					d := o["details"].(map[string]any)
					n := d["component"].(string)
					b, ok := c.want.warn[n]
					if o["severity"] == "warning" != ok {
						t.Errorf("%s: coverage finding %s %v", n, o["severity"], o["message"])
					}
					if !ok {
						continue
					}
					warned[n] = true
					bytes := int64(comps[n]["bytes"].(float64))
					if b >= 0 && bytes < b || int64(o["length"].(float64)) != bytes || !strings.Contains(o["message"].(string), comps[n]["path"].(string)+"/") {
						t.Errorf("%s: warning %v (length %v), the component has %d bytes (want >= %d)", n, o["message"], o["length"], bytes, b)
					}
				case o["type"] == "queue" && c.want.queues != nil:
					q := o["queue"].(string)
					if k, ok := c.want.queues[q]; !ok || o["keep"] != k {
						t.Errorf("queue %s: keep %v, want %v", q, o["keep"], k)
					}
					delete(c.want.queues, q)
				}
			}
			for n := range c.want.warn {
				if !warned[n] {
					t.Errorf("no coverage warning for %s", n)
				}
			}
			if len(c.want.queues) != 0 {
				t.Errorf("no queue line for %v", c.want.queues)
			}
			if c.dir == q3 && c.cmd != "salvage" && (files["quorum"] == 0 || files["stream"] == 0) {
				t.Errorf("file lines by dir %v: quorum/ and stream/ not read", files)
			}
			if c.cmd == "verify" && len(c.want.warn) > 0 {
				_, text, _ := runCLI(t, "verify", c.dir)
				head := strings.Join(strings.SplitN(text, "\n", 6)[:5], "\n")
				if !strings.Contains(head, "NOT CHECKED, holds messages: compaction ") {
					t.Errorf("the text report's first lines do not say compaction/ was not checked:\n%s", head)
				}
			}
		})
	}
}
