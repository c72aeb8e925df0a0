package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/storectl/storectl/internal/testutil"
)

// TestSummaryRecords: summary.records is the number of records the
// reported files hold (the sum of their `records`), with or without
// --records, and equals the record lines --records writes. For RocketMQ the
// count is the real 5.3.3 decoder's: the messages of
// rmq533-c-stale.decode.jsonl less the stale copies the injection made
// (rmq533-c-stale.inject.json), which are findings, not records.
func TestSummaryRecords(t *testing.T) {
	rocket := filepath.Join(testutil.Untar(t, testutil.Testdata("rocketmq", "rmq533-c-stale.tar.gz")), "store")
	rabbit := filepath.Join(testutil.Untar(t, testutil.Testdata("rabbitmq", "datasets", "crash.tar.gz")), "rmqfix@localhost")
	decoded := 0
	for _, m := range testutil.ReadJSONL[struct{ Kind string }](t, testutil.Testdata("rocketmq", "rmq533-c-stale.decode.jsonl")) {
		if m.Kind == "msg" {
			decoded++
		}
	}
	var inj struct {
		CopiedMsgs int `json:"copied_msgs"`
	}
	b, err := os.ReadFile(testutil.Testdata("rocketmq", "rmq533-c-stale.inject.json"))
	if err == nil {
		err = json.Unmarshal(b, &inj)
	}
	if err != nil || decoded == 0 || inj.CopiedMsgs == 0 {
		t.Fatalf("oracle: %d decoded, %d copied (%v)", decoded, inj.CopiedMsgs, err)
	}
	for _, c := range []struct {
		name, dir string
		want      int // -1: only check the sums agree
	}{
		{"rocketmq", rocket, decoded - inj.CopiedMsgs},
		{"rabbitmq", rabbit, -1},
	} {
		for _, withRecords := range []bool{false, true} {
			args := []string{"scan", "--progress", "none", "-o", "jsonl", c.dir}
			if withRecords {
				args = append(args[:1], append([]string{"--records"}, args[1:]...)...)
			}
			code, out, errOut := runCLI(t, args...)
			if code >= 2 {
				t.Fatalf("%s: exit %d: %s", c.name, code, errOut)
			}
			fileSum, lines, summary := 0, 0, -1
			for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
				var o struct {
					Type    string `json:"type"`
					Records int    `json:"records"`
				}
				if err := json.Unmarshal([]byte(l), &o); err != nil {
					t.Fatal(err)
				}
				switch o.Type {
				case "file":
					fileSum += o.Records
				case "record":
					lines++
				case "summary":
					summary = o.Records
				}
			}
			if summary != fileSum || summary <= 0 || (c.want >= 0 && summary != c.want) {
				t.Errorf("%s --records=%v: summary.records %d, files hold %d (want %d)", c.name, withRecords, summary, fileSum, c.want)
			}
			if withRecords && lines != summary {
				t.Errorf("%s: %d record lines, summary.records %d", c.name, lines, summary)
			}
			t.Logf("%s --records=%v: summary.records %d, record lines %d", c.name, withRecords, summary, lines)
		}
	}
}
