package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"github.com/storectl/storectl/internal/testutil"
	"github.com/storectl/storectl/pkg/report/schema"
)

// runCLI runs storectl in-process with buffers and returns exit code,
// stdout and stderr.
func runCLI(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := run(context.Background(), args, Streams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut,
		Getenv: func(string) string { return "" }})
	return code, out.String(), errOut.String()
}

// volatileJSON matches the fields of a JSONL report that differ from run
// to run (durations and timestamps): tests that compare the reports of
// two runs remove them first.
var volatileJSON = regexp.MustCompile(`"(duration_ms|started|finished)":[^,}]*`)

// runAsNobody runs storectl as uid/gid 65534 in a child process (the test
// binary re-executed), so that permission bits bite even when the tests
// run as root.
func runAsNobody(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	if os.Getuid() != 0 {
		return runCLI(t, args...)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// The test binary lives in a 0700 build dir: copy it where nobody can run it.
	b, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "storectl-exe-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	exe = filepath.Join(dir, "storectl.test")
	if err := os.WriteFile(exe, b, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, args...)
	cmd.Env = append(os.Environ(), "STORECTL_TEST_MAIN=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err = cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("re-exec as nobody: %v", err)
	}
	return code, out.String(), errOut.String()
}

// checkFormats asserts the json and jsonl reports end with a summary
// carrying want, and that every object is schema-valid.
func checkFormats(t *testing.T, name, jsonOut, jsonlOut string, want int) {
	t.Helper()
	v, err := schema.NewValidator()
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(jsonlOut), "\n")
	var last map[string]any
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &last); err != nil || last["type"] != "summary" {
		t.Fatalf("%s jsonl: last line is not a summary: %q", name, lines[len(lines)-1])
	}
	if int(last["exit_code"].(float64)) != want {
		t.Fatalf("%s jsonl: exit_code %v, want %d", name, last["exit_code"], want)
	}
	if want == exitIncomplete && last["incomplete"] != true {
		t.Fatalf("%s jsonl: exit 3 without incomplete: true", name)
	}
	for _, l := range lines {
		if err := v.ValidateObject([]byte(l)); err != nil {
			t.Fatalf("%s jsonl: %v\n%s", name, err, l)
		}
	}
	var doc struct {
		Summary struct {
			ExitCode int `json:"exit_code"`
		} `json:"summary"`
	}
	if err := json.Unmarshal([]byte(jsonOut), &doc); err != nil || doc.Summary.ExitCode != want {
		t.Fatalf("%s json: exit_code %d (%v), want %d", name, doc.Summary.ExitCode, err, want)
	}
	if err := v.ValidateDocument([]byte(jsonOut)); err != nil {
		t.Fatalf("%s json: %v", name, err)
	}
}

// TestExitCodeMatrix runs every command in every output format over
// inputs that call for each exit code, and checks that the code is the
// same in text, json and jsonl and that json/jsonl end with a summary
// carrying it.
func TestExitCodeMatrix(t *testing.T) {
	clean := filepath.Join(testutil.Untar(t, testutil.Testdata("rocketmq", "rmq533-a-clean.tar.gz")), "store")
	stale := filepath.Join(testutil.Untar(t, testutil.Testdata("rocketmq", "rmq533-c-stale.tar.gz")), "store")
	rabbit := filepath.Join(testutil.Untar(t, testutil.Testdata("rabbitmq", "datasets", "crash.tar.gz")), "rmqfix@localhost")
	missing := filepath.Join(t.TempDir(), "missing")
	before := map[string]map[string]string{}
	for _, d := range []string{clean, stale, rabbit} {
		before[d] = testutil.TreeHash(t, d)
	}
	cases := []struct {
		name string
		args []string
		want int
	}{
		{"scan clean", []string{"scan", clean}, exitOK},
		{"scan stale", []string{"scan", stale}, exitFindings},
		{"scan rabbit", []string{"scan", rabbit}, exitOK},
		{"scan missing", []string{"scan", missing}, exitUsage},
		{"scan bad flag", []string{"scan", "--no-such-flag", clean}, exitUsage},
		{"unknown command", []string{"verfy", clean}, exitUsage},
		{"verify clean", []string{"verify", clean}, exitOK},
		{"verify stale", []string{"verify", stale}, exitFindings},
		{"verify rabbit", []string{"verify", rabbit}, exitOK},
		{"verify missing", []string{"verify", missing}, exitUsage},
		{"truncate dry clean", []string{"truncate", clean}, exitOK},
		{"truncate dry stale", []string{"truncate", stale}, exitFindings},
		{"truncate apply no --yes", []string{"truncate", "--apply", stale}, exitRefused},
		{"truncate --plan without --apply", []string{"truncate", "--plan", "x.json", stale}, exitUsage},
		{"rebuild-index dry clean", []string{"rebuild-index", clean}, exitOK},
		{"rebuild-index apply no --yes", []string{"rebuild-index", "--apply", "--cq-file-size", "2000", clean}, exitRefused},
		{"undo not a backup", []string{"undo", clean}, exitUsage},
		{"version", []string{"version"}, exitOK},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			codes := map[string]int{}
			outs := map[string]string{}
			for _, f := range []string{"text", "json", "jsonl"} {
				code, out, _ := runCLI(t, append(append([]string{}, c.args...), "-o", f)...)
				codes[f], outs[f] = code, out
			}
			if codes["text"] != c.want || codes["json"] != c.want || codes["jsonl"] != c.want {
				t.Fatalf("exit codes %v, want %d in every format", codes, c.want)
			}
			checkFormats(t, c.name, outs["json"], outs["jsonl"], c.want)
		})
	}
	for d, h := range before {
		testutil.SameTree(t, h, testutil.TreeHash(t, d))
	}
}

// TestUnreadableFileIsIncomplete: a store file the user may not read
// stops part of the work: exit 3, "incomplete": true, the file named, in
// every format, and the summary is still the last JSONL line.
func TestUnreadableFileIsIncomplete(t *testing.T) {
	base, err := os.MkdirTemp("", "storectl-perm-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	if err := testutil.UntarTo(testutil.Testdata("rocketmq", "rmq533-a-clean.tar.gz"), base); err != nil {
		t.Fatal(err)
	}
	if err := testutil.UntarTo(testutil.Testdata("rabbitmq", "datasets", "crash.tar.gz"), base); err != nil {
		t.Fatal(err)
	}
	_ = filepath.Walk(base, func(p string, info os.FileInfo, err error) error {
		if err == nil && info.IsDir() {
			os.Chmod(p, 0o755)
		} else if err == nil {
			os.Chmod(p, 0o644)
		}
		return nil
	})
	rocket := filepath.Join(base, "store")
	rabbit := filepath.Join(base, "rmqfix@localhost")
	lockedFiles := []string{
		filepath.Join(rocket, "commitlog", "00000000000000262144"),
		filepath.Join(rabbit, "msg_stores", "vhosts", "628WB79CIFDYO9LJI6DKMI09L", "msg_store_persistent", "20.rdq"),
	}
	for _, f := range lockedFiles {
		if err := os.Chmod(f, 0); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct{ cmd, dir, file string }{
		{"scan", rocket, "00000000000000262144"}, {"verify", rocket, "00000000000000262144"},
		{"scan", rabbit, "20.rdq"}, {"verify", rabbit, "20.rdq"},
	} {
		outs := map[string]string{}
		for _, f := range []string{"text", "json", "jsonl"} {
			code, out, errOut := runAsNobody(t, c.cmd, c.dir, "-o", f)
			if code != exitIncomplete {
				t.Fatalf("%s %s -o %s: exit %d, want 3\n%s\n%s", c.cmd, c.dir, f, code, out, errOut)
			}
			if !strings.Contains(out+errOut, c.file) {
				t.Fatalf("%s -o %s: the unreadable file %s is not named:\n%s\n%s", c.cmd, f, c.file, out, errOut)
			}
			outs[f] = out
		}
		checkFormats(t, c.cmd+" "+c.file, outs["json"], outs["jsonl"], exitIncomplete)
	}
}
