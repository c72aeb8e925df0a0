package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/storectl/storectl/internal/testutil"
)

type baselineReport struct {
	Findings []struct {
		Code     string `json:"code"`
		Key      string `json:"key"`
		Baseline string `json:"baseline"`
	} `json:"findings"`
	Summary struct {
		ExitCode int `json:"exit_code"`
		Baseline struct {
			Previous         bool `json:"previous"`
			New              int  `json:"new"`
			Persistent       int  `json:"persistent"`
			Resolved         int  `json:"resolved"`
			ResolvedFindings []struct {
				Key  string `json:"key"`
				Code string `json:"code"`
			} `json:"resolved_findings"`
		} `json:"baseline"`
	} `json:"summary"`
}

func (r *baselineReport) keys(status string) []string {
	var out []string
	for _, f := range r.Findings {
		if status == "" || f.Baseline == status {
			out = append(out, f.Key)
		}
	}
	slices.Sort(out)
	return out
}

// TestBaselineThreeRuns: verify --baseline over three states of one store
// — as shipped (13 stale records), with damage added (one byte of a
// record flipped), repaired (the byte put back and truncate --apply) —
// marks each finding new or persistent against the run before, lists what
// went away as resolved, and --fail-on new fails only when something new
// appeared. Every expectation is derived from the reports themselves: the
// keys a run calls persistent are exactly the previous run's keys it saw
// again, the resolved ones exactly those it did not.
func TestBaselineThreeRuns(t *testing.T) {
	store := filepath.Join(testutil.Untar(t, testutil.Testdata("rocketmq", "rmq533-c-stale.tar.gz")), "store")
	bl := filepath.Join(t.TempDir(), "baseline.json")
	verify := func(args ...string) (int, *baselineReport) {
		t.Helper()
		code, out, errOut := runCLI(t, append([]string{"verify", "-o", "json", "--baseline", bl}, append(args, store)...)...)
		r := &baselineReport{}
		if err := json.Unmarshal([]byte(out), r); err != nil {
			t.Fatalf("%v\n%s\n%s", err, out, errOut)
		}
		if r.Summary.ExitCode != code {
			t.Fatalf("exit %d, summary says %d", code, r.Summary.ExitCode)
		}
		return code, r
	}
	check := func(name string, prev, cur *baselineReport) {
		t.Helper()
		var wantPersistent, wantNew, wantResolved []string
		for _, k := range cur.keys("") {
			if slices.Contains(prev.keys(""), k) {
				wantPersistent = append(wantPersistent, k)
			} else {
				wantNew = append(wantNew, k)
			}
		}
		for _, k := range prev.keys("") {
			if !slices.Contains(cur.keys(""), k) {
				wantResolved = append(wantResolved, k)
			}
		}
		var resolved []string
		for _, r := range cur.Summary.Baseline.ResolvedFindings {
			resolved = append(resolved, r.Key)
		}
		slices.Sort(resolved)
		b := cur.Summary.Baseline
		if !slices.Equal(cur.keys("persistent"), wantPersistent) || !slices.Equal(cur.keys("new"), wantNew) ||
			!slices.Equal(resolved, wantResolved) || b.New != len(wantNew) || b.Persistent != len(wantPersistent) || b.Resolved != len(wantResolved) {
			t.Errorf("%s: new %d persistent %d resolved %d; want %d %d %d", name, b.New, b.Persistent, b.Resolved,
				len(wantNew), len(wantPersistent), len(wantResolved))
		}
	}

	// Run 1: no baseline file yet: every finding is new.
	code, r1 := verify("--fail-on", "new")
	if code != exitFindings || r1.Summary.Baseline.Previous || r1.Summary.Baseline.New != len(r1.Findings) || len(r1.Findings) == 0 {
		t.Fatalf("run 1: exit %d, %+v", code, r1.Summary.Baseline)
	}
	// The same store again: all persistent, and --fail-on new passes.
	code, r1b := verify("--fail-on", "new")
	check("run 1 again", r1, r1b)
	if code != exitOK || r1b.Summary.Baseline.New != 0 || r1b.Summary.Baseline.Persistent != len(r1.Findings) {
		t.Fatalf("run 1 again: exit %d, %+v", code, r1b.Summary.Baseline)
	}
	// Without --fail-on new the known problems still fail the job.
	if code, _ := verify(); code != exitFindings {
		t.Fatalf("run 1 without --fail-on new: exit %d", code)
	}

	// Run 2: damage one byte inside the first valid record's frame.
	cl := filepath.Join(store, "commitlog", "00000000000000000000")
	patchFile(t, cl, func(b []byte) []byte { b[1355+100] ^= 0xff; return b })
	code, r2 := verify("--fail-on", "new")
	check("run 2", r1b, r2)
	if code != exitFindings || r2.Summary.Baseline.New == 0 || r2.Summary.Baseline.Persistent == 0 {
		t.Fatalf("run 2: exit %d, %+v", code, r2.Summary.Baseline)
	}
	// Asked again, the damage is known: --fail-on new passes.
	code, r2b := verify("--fail-on", "new")
	check("run 2 again", r2, r2b)
	if code != exitOK {
		t.Fatalf("run 2 again: exit %d", code)
	}

	// Run 3: the byte put back and the stale tail truncated.
	patchFile(t, cl, func(b []byte) []byte { b[1355+100] ^= 0xff; return b })
	if code, out, errOut := runCLI(t, "truncate", "--apply", "--yes", "--backup-dir", filepath.Join(t.TempDir(), "bk"), store); code != exitOK {
		t.Fatalf("truncate --apply: exit %d\n%s\n%s", code, out, errOut)
	}
	code, r3 := verify("--fail-on", "new", "--metrics-file", filepath.Join(t.TempDir(), "m.prom"))
	check("run 3", r2b, r3)
	stale := 0
	for _, r := range r3.Summary.Baseline.ResolvedFindings {
		if r.Code == "rocketmq.commitlog.stale-record" {
			stale++
		}
	}
	if code != exitOK || r3.Summary.Baseline.New != 0 || stale != r1.codeCount("rocketmq.commitlog.stale-record") || stale == 0 {
		t.Fatalf("run 3: exit %d, %+v, %d stale records resolved", code, r3.Summary.Baseline, stale)
	}
	// The baseline file now holds run 3's findings.
	b, err := os.ReadFile(bl)
	if err != nil || strings.Count(string(b), `"key"`) != len(r3.Findings) {
		t.Fatalf("baseline file after run 3: %v\n%s", err, b)
	}
}

func (r *baselineReport) codeCount(code string) int {
	n := 0
	for _, f := range r.Findings {
		if f.Code == code {
			n++
		}
	}
	return n
}

// TestBaselineUsage: --fail-on new without --baseline, and a --baseline
// file that is not one, are usage errors (2), and such a file is left as
// it was.
func TestBaselineUsage(t *testing.T) {
	store := filepath.Join(testutil.Untar(t, testutil.Testdata("rocketmq", "rmq533-c-stale.tar.gz")), "store")
	if code, _, errOut := runCLI(t, "verify", "--fail-on", "new", store); code != exitUsage || !strings.Contains(errOut, "needs --baseline") {
		t.Errorf("--fail-on new alone: exit %d %q", code, errOut)
	}
	if code, _, _ := runCLI(t, "scan", "--fail-on", "new", store); code != exitUsage {
		t.Errorf("scan --fail-on new: exit %d", code)
	}
	notOne := filepath.Join(t.TempDir(), "x.json")
	os.WriteFile(notOne, []byte(`{"a":1}`), 0o644)
	if code, _, errOut := runCLI(t, "verify", "--baseline", notOne, store); code != exitUsage || !strings.Contains(errOut, "not a storectl baseline") {
		t.Errorf("bad baseline: exit %d %q", code, errOut)
	}
	if b, _ := os.ReadFile(notOne); string(b) != `{"a":1}` {
		t.Errorf("a file that is not a baseline was overwritten")
	}
}
