package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/storectl/storectl/internal/testutil"
)

// TestScanSeveralTargets: `scan A B` of two RocketMQ stores gives every
// file, finding and record the root of its own store, and each store its
// own summary (summary.targets) equal to what scanning it alone says:
// files, records, counts, codes and recovery_end. The totals add them up
// and there is no single top-level recovery_end.
func TestScanSeveralTargets(t *testing.T) {
	a := filepath.Join(testutil.Untar(t, testutil.Testdata("rocketmq", "rmq533-a-clean.tar.gz")), "store")
	b := filepath.Join(testutil.Untar(t, testutil.Testdata("rocketmq", "rmq533-c-stale.tar.gz")), "store")
	alone := map[string]map[string]any{}
	for _, d := range []string{a, b} {
		_, out, _ := runCLI(t, "scan", d, "-o", "jsonl")
		objs := jsonlObjects(t, out)
		alone[d] = objs[len(objs)-1]
	}
	code, out, errOut := runCLI(t, "scan", a, b, "--records", "-o", "jsonl")
	if code != exitFindings {
		t.Fatalf("scan A B: exit %d\n%s", code, errOut)
	}
	_, js, _ := runCLI(t, "scan", a, b, "-o", "json")
	checkFormats(t, "scan A B", js, out, exitFindings)
	objs := jsonlObjects(t, out)
	run, sum := objs[0], objs[len(objs)-1]
	if ts, _ := run["targets"].([]any); len(ts) != 2 || ts[0].(map[string]any)["data_dir"] != a || ts[1].(map[string]any)["data_dir"] != b {
		t.Fatalf("run targets %v", run["targets"])
	}
	perRoot := map[string]map[string]int{a: {}, b: {}}
	for _, o := range objs[1 : len(objs)-1] {
		typ := o["type"].(string)
		root, _ := o["root"].(string)
		if perRoot[root] == nil {
			t.Fatalf("%s without the root of its store: %v", typ, o)
		}
		perRoot[root][typ]++
		if p, _ := o["path"].(string); strings.HasPrefix(p, "/") {
			t.Fatalf("%s path %q is not relative to its root", typ, p)
		}
	}
	if _, ok := sum["recovery_end"]; ok {
		t.Fatalf("top-level recovery_end with two RocketMQ stores: %v", sum["recovery_end"])
	}
	ts, _ := sum["targets"].([]any)
	if len(ts) != 2 {
		t.Fatalf("summary targets: %v", sum["targets"])
	}
	var files float64
	for i, d := range []string{a, b} {
		got, want := ts[i].(map[string]any), alone[d]
		for _, k := range []string{"files", "records", "bytes_scanned", "recovery_end"} {
			if got[k] != want[k] {
				t.Fatalf("target %s: %s %v, scanning it alone %v", d, k, got[k], want[k])
			}
		}
		if jsonString(t, got["counts"]) != jsonString(t, want["counts"]) || jsonString(t, got["codes"]) != jsonString(t, want["codes"]) {
			t.Fatalf("target %s: counts %v codes %v, alone %v %v", d, got["counts"], got["codes"], want["counts"], want["codes"])
		}
		if float64(perRoot[d]["file"]) != want["files"] || float64(perRoot[d]["record"]) != want["records"] {
			t.Fatalf("target %s: %d file and %d record lines, alone %v files %v records", d, perRoot[d]["file"], perRoot[d]["record"], want["files"], want["records"])
		}
		files += got["files"].(float64)
	}
	if sum["files"] != files {
		t.Fatalf("summary files %v, targets add up to %v", sum["files"], files)
	}
	_, text, _ := runCLI(t, "scan", a, b)
	if !strings.Contains(text, a+" (rocketmq): ") || !strings.Contains(text, b+" (rocketmq): 13 error(s)") {
		t.Fatalf("text report has no line per target:\n%s", text)
	}
}

func jsonString(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestScanNotDataFile: scan (and verify) of a file that is not a store
// data file says what it is and which command reads it, exit 2.
func TestScanNotDataFile(t *testing.T) {
	rmq := filepath.Join(testutil.Untar(t, testutil.Testdata("rocketmq", "rmq533-a-clean.tar.gz")), "store")
	rabbit := filepath.Join(testutil.Untar(t, testutil.Testdata("rabbitmq-4.0", "datasets", "crash.tar.gz")), "rmq40@localhost")
	qi, _ := filepath.Glob(filepath.Join(rabbit, "msg_stores", "vhosts", "*", "queues", "*", "0.qi"))
	idx, _ := filepath.Glob(filepath.Join(rmq, "index", "*"))
	if len(qi) == 0 || len(idx) == 0 {
		t.Fatal("fixture files missing")
	}
	for _, c := range []struct{ file, what string }{
		{filepath.Join(rmq, "consumequeue", "TopicA", "0", "00000000000000000000"), "consume queue"},
		{idx[0], "index file"},
		{qi[0], "queue index"},
	} {
		for _, cmd := range []string{"scan", "verify"} {
			code, out, errOut := runCLI(t, cmd, c.file, "-o", "jsonl")
			if code != exitUsage || !strings.Contains(errOut, c.what) || !strings.Contains(errOut, "storectl verify ") {
				t.Fatalf("%s %s: exit %d, stderr %q", cmd, c.file, code, errOut)
			}
			objs := jsonlObjects(t, out)
			if s := objs[len(objs)-1]; s["exit_code"].(float64) != exitUsage || s["files"].(float64) != 0 {
				t.Fatalf("%s %s: summary %v", cmd, c.file, s)
			}
		}
	}
}
