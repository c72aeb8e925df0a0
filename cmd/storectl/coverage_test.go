package main

import (
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/storectl/storectl/internal/testutil"
	"github.com/storectl/storectl/pkg/scan"
)

// jsonlObjects splits a JSONL report into its objects.
func jsonlObjects(t *testing.T, out string) []map[string]any {
	t.Helper()
	var objs []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("not JSON: %q", l)
		}
		objs = append(objs, m)
	}
	return objs
}

// TestCoverageVerdict: verify, scan and salvage of a data dir holding
// message components no scanner of theirs reads (Q3's quorum/ and stream/,
// t1's timerlog/) list every component in the run record, warn once per
// such component naming its bytes, and so exit 1; the text report's first
// lines say what was not checked. Whatever the registry marks read, the
// run agrees with the registry.
func TestCoverageVerdict(t *testing.T) {
	q3 := filepath.Join(testutil.Untar(t, testutil.Testdata("rabbitmq-4.0-qq-stream", "datasets", "Q3.tar.gz")), "rmq40@localhost")
	t1 := filepath.Join(testutil.Untar(t, testutil.Testdata("rocketmq-5x", "rmq533-t1-clean.tar.gz")), "store")
	for _, c := range []struct {
		dir   string
		watch []string // components the issue names
	}{
		{q3, []string{scan.RabbitQuorum, scan.RabbitStream}},
		{t1, []string{scan.RocketTimerLog}},
	} {
		tg, err := scan.Detect(c.dir, "")
		if err != nil {
			t.Fatal(err)
		}
		for _, cmd := range []string{"verify", "scan", "salvage"} {
			args := []string{cmd, c.dir, "-o", "jsonl"}
			if cmd == "salvage" {
				args = append(args, "--out", filepath.Join(t.TempDir(), "out"))
			}
			code, out, errOut := runCLI(t, args...)
			objs := jsonlObjects(t, out)
			run := objs[0]
			inv := scan.TakeInventory(tg)
			inv.Check(cmd)
			comps, _ := run["components"].([]any)
			if len(comps) != len(inv.Components) || len(comps) == 0 {
				t.Fatalf("%s %s: run lists %d components, the inventory has %d", cmd, c.dir, len(comps), len(inv.Components))
			}
			unread := 0
			for i, x := range comps {
				m := x.(map[string]any)
				ic := inv.Components[i]
				if m["name"] != ic.Name || m["path"] != ic.Path || m["checked"] != ic.Checked || int64(m["bytes"].(float64)) != ic.Bytes {
					t.Fatalf("%s: run component %v, inventory %+v", cmd, m, ic)
				}
				if !ic.Checked && ic.HoldsMessages {
					unread++
				}
			}
			warnings := map[string]float64{}
			for _, o := range objs {
				if o["type"] == "finding" && o["severity"] == "warning" && strings.HasSuffix(o["code"].(string), ".coverage.unchecked") {
					warnings[o["details"].(map[string]any)["component"].(string)] = o["length"].(float64)
				}
			}
			if len(warnings) != unread {
				t.Fatalf("%s: %d coverage warnings for %d unread message components", cmd, len(warnings), unread)
			}
			for _, name := range c.watch {
				spec := scan.Components[name]
				read := spec.ReadBy != "" && scan.Reads(cmd, spec.ReadBy)
				if _, warned := warnings[name]; warned == read {
					t.Fatalf("%s %s: %s read %v but warned %v", cmd, c.dir, name, read, warned)
				}
			}
			if unread > 0 && code < exitFindings {
				t.Fatalf("%s: exit %d with %d message components unread\n%s", cmd, code, unread, errOut)
			}
			if cmd == "verify" {
				code, text, _ := runCLI(t, "verify", c.dir)
				// The answer-first head: the verdict, then what was not checked.
				head := strings.SplitN(text, "\n", 6)
				if unread > 0 && (code != exitFindings && code != exitIncomplete || !slices.ContainsFunc(head[:min(len(head), 5)], func(l string) bool { return strings.HasPrefix(l, "NOT CHECKED, holds messages: ") })) {
					t.Fatalf("verify text: exit %d, head %q", code, head)
				}
				nc := ""
				for _, l := range head[:min(len(head), 5)] {
					if strings.HasPrefix(l, "NOT CHECKED") {
						nc = l
					}
				}
				for name, length := range warnings {
					path := ""
					for _, ic := range inv.Components {
						if ic.Name == name {
							path = ic.Path
						}
					}
					if !strings.Contains(text, "NOT CHECKED, holds messages: "+path) || !strings.Contains(nc, path) || !strings.Contains(text, formatInt(int64(length))) {
						t.Fatalf("verify text does not name %s (%s, %d bytes): %q", name, path, int64(length), nc)
					}
				}
			}
		}
	}
}

func formatInt(n int64) string {
	b, _ := json.Marshal(n)
	return string(b)
}
