package main

import (
	"bytes"
	"context"
	"encoding/json"
	"maps"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/storectl/storectl/internal/testutil"
)

// runTTY runs storectl with stdin a terminal answering answer.
func runTTY(args []string, answer string) (int, string, string) {
	var out, errOut bytes.Buffer
	code := run(context.Background(), args, Streams{In: strings.NewReader(answer), Out: &out, ErrOut: &errOut, InTTY: true,
		Getenv: func(string) string { return "" }})
	return code, out.String(), errOut.String()
}

type actionJSON struct {
	Status   string `json:"status"`
	Op       string `json:"op"`
	Path     string `json:"path"`
	Offset   int64  `json:"offset"`
	Length   int64  `json:"length"`
	Bytes    *int64 `json:"bytes"`
	Message  string `json:"message"`
	Restores []struct {
		Offset, Length int64
	} `json:"restores"`
}

type writerReport struct {
	Findings []json.RawMessage `json:"findings"`
	Files    []json.RawMessage `json:"files"`
	Actions  []actionJSON      `json:"actions"`
	Summary  struct {
		ExitCode     int            `json:"exit_code"`
		BackupDir    string         `json:"backup_dir"`
		Counts       map[string]int `json:"counts"`
		Codes        map[string]int `json:"codes"`
		Files        int            `json:"files"`
		BytesScanned int64          `json:"bytes_scanned"`
		Extra        struct {
			BackupDir string `json:"backup_dir"`
		} `json:"extra"`
	} `json:"summary"`
}

func decodeReport(t *testing.T, out string) *writerReport {
	t.Helper()
	r := &writerReport{}
	if err := json.Unmarshal([]byte(out), r); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	return r
}

// TestApplyYouCanFollow: on a terminal the plan is on the screen before
// the question; after the apply the text says where the backup is and the
// exact undo command, JSON has backup_dir at the top of the summary; that
// command's dry run lists the ranges and bytes it puts back (the apply's
// own ranges), its prompt shows them first, and it restores every byte.
func TestApplyYouCanFollow(t *testing.T) {
	store := filepath.Join(testutil.Untar(t, testutil.Testdata("rocketmq", "rmq533-c-stale.tar.gz")), "store")
	before := testutil.TreeHash(t, store)
	// What the apply will do, from the dry run's JSON.
	_, dry, _ := runCLI(t, "truncate", "-o", "json", store)
	plan := decodeReport(t, dry).Actions
	if len(plan) == 0 {
		t.Fatal("no planned actions")
	}
	bk := filepath.Join(t.TempDir(), "bk")
	code, out, errOut := runTTY([]string{"truncate", "--apply", "--backup-dir", bk, store}, "y\n")
	if code != exitOK {
		t.Fatalf("apply: exit %d\n%s\n%s", code, out, errOut)
	}
	planAt, askAt := strings.Index(errOut, "Plan for "), strings.Index(errOut, "[y/N]")
	if planAt < 0 || askAt < planAt || !strings.Contains(errOut[planAt:askAt], plan[0].Op+" "+plan[0].Path) {
		t.Fatalf("the plan is not shown before the prompt:\n%s", errOut)
	}
	m := regexp.MustCompile(`(?m)^undo: +(storectl undo (\S+) --apply)$`).FindStringSubmatch(out)
	if !strings.Contains(out, "backup: "+bk) || m == nil || m[2] != bk {
		t.Fatalf("no backup dir or undo command in the text:\n%s", out)
	}
	undoArgs := strings.Fields(m[1])[1:]

	// The JSON of an apply (nothing left to do now, so a fresh copy).
	store2 := filepath.Join(testutil.Untar(t, testutil.Testdata("rocketmq", "rmq533-c-stale.tar.gz")), "store")
	bk2 := filepath.Join(t.TempDir(), "bk2")
	_, jout, _ := runCLI(t, "truncate", "--apply", "--yes", "--backup-dir", bk2, "-o", "json", store2)
	if r := decodeReport(t, jout); r.Summary.BackupDir != bk2 || r.Summary.Extra.BackupDir != bk2 {
		t.Fatalf("summary backup_dir %q, extra %q", r.Summary.BackupDir, r.Summary.Extra.BackupDir)
	}

	// The undo's dry run: per file the ranges and bytes it puts back.
	code, uout, _ := runCLI(t, "undo", "-o", "json", bk)
	u := decodeReport(t, uout)
	if code != exitFindings || len(u.Actions) != len(plan) {
		t.Fatalf("undo dry run: exit %d, %d actions for %d applied", code, len(u.Actions), len(plan))
	}
	for i, a := range u.Actions {
		p := plan[i]
		if a.Op != "undo-restore" || a.Path != p.Path || a.Offset != p.Offset || a.Length != p.Length || a.Bytes == nil || *a.Bytes != p.Length ||
			len(a.Restores) != 1 || a.Restores[0].Offset != p.Offset || a.Restores[0].Length != p.Length || !strings.Contains(a.Message, "put back") {
			t.Errorf("undo action %+v for applied %+v", a, p)
		}
	}
	_, utext, _ := runCLI(t, "undo", bk)
	if strings.Contains(utext, "0 record(s)") || !strings.Contains(utext, "put back") {
		t.Errorf("undo text plan:\n%s", utext)
	}
	// The printed command, on a terminal: the undo plan, then the question.
	code, out, errOut = runTTY(undoArgs, "y\n")
	planAt, askAt = strings.Index(errOut, "Undo plan for "), strings.Index(errOut, "[y/N]")
	if code != exitOK || planAt < 0 || askAt < planAt || !strings.Contains(errOut[planAt:askAt], "put back") {
		t.Fatalf("undo: exit %d\n%s\n%s", code, out, errOut)
	}
	testutil.SameTree(t, before, testutil.TreeHash(t, store))
}

// TestDryRunCarriesScanCounts: a dry run's summary counts the scan its
// plan came from: the same files, bytes and findings as scan reports for
// the store (RocketMQ: the same commitlog scan), not zeros.
func TestDryRunCarriesScanCounts(t *testing.T) {
	rocket := filepath.Join(testutil.Untar(t, testutil.Testdata("rocketmq", "rmq533-c-stale.tar.gz")), "store")
	rabbit := filepath.Join(testutil.Untar(t, testutil.Testdata("rabbitmq", "datasets", "crash-mid-write-confirmed.tar.gz")), "rmqfix@localhost")
	for _, c := range []struct {
		name, dir string
		cmds      []string
	}{{"rocketmq", rocket, []string{"truncate", "rebuild-index"}}, {"rabbitmq", rabbit, []string{"truncate", "harden", "rebuild-index"}}} {
		_, sout, _ := runCLI(t, "scan", "-o", "json", c.dir)
		sc := decodeReport(t, sout)
		for _, cmd := range c.cmds {
			_, out, _ := runCLI(t, cmd, "-o", "json", c.dir)
			r := decodeReport(t, out)
			if r.Summary.Files != sc.Summary.Files || r.Summary.BytesScanned != sc.Summary.BytesScanned || len(r.Files) != len(sc.Files) || r.Summary.Files == 0 {
				t.Errorf("%s %s: %d files %d bytes; scan: %d files %d bytes", c.name, cmd, r.Summary.Files, r.Summary.BytesScanned, sc.Summary.Files, sc.Summary.BytesScanned)
			}
			n := r.Summary.Counts["error"] + r.Summary.Counts["warning"] + r.Summary.Counts["info"]
			if n != len(r.Findings) || n == 0 {
				t.Errorf("%s %s: counts %v for %d findings", c.name, cmd, r.Summary.Counts, len(r.Findings))
			}
			// scan adds the coverage of the whole data dir; the codes of the
			// commitlog scan itself are the same.
			if c.name == "rocketmq" && !maps.Equal(withoutCoverage(r.Summary.Codes), withoutCoverage(sc.Summary.Codes)) {
				t.Errorf("%s %s: codes %v, scan %v", c.name, cmd, r.Summary.Codes, sc.Summary.Codes)
			}
		}
	}
}

func withoutCoverage(codes map[string]int) map[string]int {
	out := map[string]int{}
	for c, n := range codes {
		if !strings.Contains(c, ".coverage.") {
			out[c] = n
		}
	}
	return out
}
