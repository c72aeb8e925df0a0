package main

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/robfig/cron/v3"

	"github.com/storectl/storectl/internal/testutil"
)

// cronBlock is the README's ```cron block: its environment lines and its
// jobs (/etc/cron.d format: five time fields, a user, the command).
type cronBlock struct {
	env  map[string]string
	jobs []cronJob
}

type cronJob struct{ schedule, user, command string }

var cronEnvLine = regexp.MustCompile(`^([A-Za-z_][A-Za-z0-9_]*)=(.*)$`)

// readmeCron parses the README's cron block as cron would: one job per
// line (no continuations), % is not allowed unescaped, and the time fields
// must parse with a standard cron parser.
func readmeCron(t *testing.T) cronBlock {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(testutil.RepoRoot(), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), "```cron\n")
	block, _, ok2 := strings.Cut(rest, "```")
	if !ok || !ok2 {
		t.Fatal("README.md has no ```cron block")
	}
	cb := cronBlock{env: map[string]string{}}
	sc := bufio.NewScanner(strings.NewReader(block))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if strings.HasSuffix(line, `\`) {
			t.Fatalf("cron line %d continues with a backslash: crontab rejects it (%q)", n, line)
		}
		if m := cronEnvLine.FindStringSubmatch(line); m != nil {
			cb.env[m[1]] = m[2]
			continue
		}
		f := strings.Fields(line)
		if len(f) < 7 {
			t.Fatalf("cron line %d: want 5 time fields, a user and a command: %q", n, line)
		}
		sched := strings.Join(f[:5], " ")
		if _, err := cron.ParseStandard(sched); err != nil {
			t.Fatalf("cron line %d: time fields %q: %v", n, sched, err)
		}
		cmd := strings.Join(f[6:], " ")
		if strings.Contains(strings.ReplaceAll(cmd, `\%`, ""), "%") {
			t.Fatalf("cron line %d: an unescaped %% ends the command in cron: %q", n, cmd)
		}
		cb.jobs = append(cb.jobs, cronJob{schedule: sched, user: f[5], command: cmd})
	}
	if len(cb.jobs) != 1 {
		t.Fatalf("README cron block has %d jobs, want 1", len(cb.jobs))
	}
	return cb
}

// TestReadmeCron runs the README's cron job as cron would (its SHELL and
// PATH, the user field checked) against a fixture store, twice: the first
// run creates the log, baseline and textfile dirs, finds the fixture's
// problems as new (exit 1: the alert fires); the second finds them all
// persistent (exit 0 with --fail-on new: no alert).
func TestReadmeCron(t *testing.T) {
	cb := readmeCron(t)
	job := cb.jobs[0]
	if job.user != "root" {
		t.Errorf("user field %q", job.user)
	}
	if cb.env["SHELL"] != "/bin/sh" {
		t.Errorf("SHELL=%q", cb.env["SHELL"])
	}
	tmp := t.TempDir()
	store := filepath.Join(testutil.Untar(t, testutil.Testdata("rocketmq", "rmq533-c-stale.tar.gz")), "store")
	bin := testBinary(t)
	logger := filepath.Join(filepath.Dir(bin), "logger")
	loggerOut := filepath.Join(tmp, "logger.out")
	if err := os.WriteFile(logger, []byte("#!/bin/sh\necho \"$@\" >> '"+loggerOut+"'\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	dirs := map[string]string{
		"/var/log/storectl":               filepath.Join(tmp, "log"),
		"/var/lib/storectl":               filepath.Join(tmp, "lib"),
		"/var/lib/node_exporter/textfile": filepath.Join(tmp, "textfile"),
		"/var/lib/rocketmq/store":         store,
	}
	command := job.command
	for from, to := range dirs {
		if !strings.Contains(command, from) {
			t.Fatalf("the cron command no longer names %s: update the test", from)
		}
		command = strings.ReplaceAll(command, from, to)
	}
	runJob := func() {
		t.Helper()
		c := exec.Command(cb.env["SHELL"], "-c", command)
		c.Env = []string{"PATH=" + filepath.Dir(bin) + ":" + cb.env["PATH"], "HOME=" + tmp}
		if out, err := c.CombinedOutput(); err != nil {
			t.Fatalf("cron command: %v\n%s", err, out)
		}
	}
	last := func() (int, int) {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(tmp, "log", "verify.jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		var sum struct {
			ExitCode int `json:"exit_code"`
		}
		if err := json.Unmarshal([]byte(lines[len(lines)-1]), &sum); err != nil {
			t.Fatal(err)
		}
		return sum.ExitCode, strings.Count(string(b), `"baseline":"new"`)
	}
	metric := func(name string) string {
		t.Helper()
		b, _ := os.ReadFile(filepath.Join(tmp, "textfile", "storectl.prom"))
		m := regexp.MustCompile(`(?m)^` + name + `\{[^}]*\} (\S+)$`).FindStringSubmatch(string(b))
		if m == nil {
			t.Fatalf("no %s in the textfile:\n%s", name, b)
		}
		return m[1]
	}

	runJob()
	code, newFindings := last()
	alert, _ := os.ReadFile(loggerOut)
	if code != exitFindings || newFindings == 0 || !strings.Contains(string(alert), "-t storectl storectl verify exit 1") {
		t.Fatalf("first run: exit %d, %d new findings, alert %q", code, newFindings, alert)
	}
	if got := metric("storectl_findings_new"); got != itoa(newFindings) {
		t.Errorf("storectl_findings_new %s, the log has %d new findings", got, newFindings)
	}
	if metric("storectl_exit_code") != "1" {
		t.Errorf("storectl_exit_code %s", metric("storectl_exit_code"))
	}
	if _, err := os.Stat(filepath.Join(tmp, "lib", "baseline.json")); err != nil {
		t.Fatalf("no baseline written: %v", err)
	}

	runJob()
	code, newFindings = last()
	alert2, _ := os.ReadFile(loggerOut)
	if code != exitOK || newFindings != 0 || string(alert2) != string(alert) {
		t.Fatalf("second run: exit %d, %d new findings, alerts %q", code, newFindings, alert2)
	}
	if metric("storectl_findings_new") != "0" || metric("storectl_exit_code") != "0" {
		t.Errorf("second run metrics: new %s exit %s", metric("storectl_findings_new"), metric("storectl_exit_code"))
	}
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }
