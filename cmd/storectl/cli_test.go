package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/storectl/storectl/internal/testutil"
)

// TestHelpOnStdout: --help, help and --version print on stdout (so that
// `storectl verify --help | grep fail` works) and nothing on stderr.
func TestHelpOnStdout(t *testing.T) {
	for _, args := range [][]string{{"verify", "--help"}, {"help", "verify"}, {"--help"}} {
		code, out, errOut := runCLI(t, args...)
		if code != 0 || errOut != "" || !strings.Contains(out, "--fail-on") || !strings.Contains(out, "Examples:") {
			t.Errorf("%v: exit %d, stderr %q, stdout:\n%s", args, code, errOut, out)
		}
	}
	code, out, errOut := runCLI(t, "--version")
	if code != 0 || errOut != "" || !regexp.MustCompile(`^storectl \S+ \(schema storectl/v1, go`).MatchString(out) {
		t.Errorf("--version: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	_, vout, _ := runCLI(t, "version")
	if vout != out {
		t.Errorf("--version %q differs from version %q", out, vout)
	}
}

// TestEveryCommandHasExample: every command a user can see has an
// Examples section that names the command.
func TestEveryCommandHasExample(t *testing.T) {
	root := newRootCmd(newEnv(Streams{}))
	var walk func(c *cobra.Command)
	n := 0
	walk = func(c *cobra.Command) {
		if c.Hidden || c.Name() == "help" {
			return
		}
		n++
		if !strings.Contains(c.Example, c.CommandPath()) && !strings.Contains(c.Example, "storectl "+c.Name()) {
			t.Errorf("%s: no example that runs it: %q", c.CommandPath(), c.Example)
		}
		for _, s := range c.Commands() {
			walk(s)
		}
	}
	walk(root)
	if n < 10 {
		t.Fatalf("walked %d commands", n)
	}
}

// testBinary is the test binary standing in for storectl (TestMain runs
// the CLI when STORECTL_TEST_MAIN=1): a wrapper script named storectl in
// a temp dir, so shells can run it by name.
func testBinary(t *testing.T) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	p := filepath.Join(dir, "storectl")
	script := "#!/bin/sh\nSTORECTL_TEST_MAIN=1 exec '" + exe + "' \"$@\"\n"
	if err := os.WriteFile(p, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestCompletionSourced: `source <(storectl completion bash)` in bash
// installs the completion (complete -p storectl names it), and the
// completer it calls offers verify and version for "storectl ver".
func TestCompletionSourced(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash")
	}
	bin := testBinary(t)
	// The sourced script answers through `storectl __complete` (what it
	// runs on <TAB>); bash-completion's helpers need not be installed.
	script := `source <(storectl completion bash) && complete -p storectl && storectl __complete ver | sed 's/^/reply: /'`
	cmd := exec.Command(bash, "-c", script)
	cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(bin)+":"+os.Getenv("PATH"))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	s := string(out)
	if !strings.Contains(s, "complete -o default -F __start_storectl storectl") ||
		!strings.Contains(s, "reply: verify") || !strings.Contains(s, "reply: version") {
		t.Fatalf("completion not installed or not answering:\n%s", s)
	}
	for _, sh := range []string{"zsh", "fish"} {
		code, out, errOut := runCLI(t, "completion", sh)
		if code != 0 || errOut != "" || !strings.Contains(out, "storectl") {
			t.Errorf("completion %s: exit %d, stderr %q, %d bytes on stdout", sh, code, errOut, len(out))
		}
	}
}

// TestStoreFlags: the layout flags mean the same on every command that
// reads a store (one name, one help text), and a flag of the other store
// kind given on the command line is refused with exit 2, not ignored.
func TestStoreFlags(t *testing.T) {
	root := newRootCmd(newEnv(Streams{}))
	usage := map[string]string{}
	for _, c := range root.Commands() {
		for _, name := range []string{"mapped-file-size", "max-message-size", "cq-file-size", "index-slots", "index-entries", "records"} {
			f := c.Flags().Lookup(name)
			if f == nil {
				continue
			}
			if u, ok := usage[name]; ok && u != f.Usage {
				t.Errorf("--%s of %s: %q, elsewhere %q", name, c.Name(), f.Usage, u)
			}
			usage[name] = f.Usage
		}
	}
	for _, want := range []struct{ cmd, flag string }{
		{"scan", "max-message-size"}, {"verify", "max-message-size"}, {"truncate", "max-message-size"},
		{"rebuild-index", "max-message-size"}, {"salvage", "max-message-size"}, {"salvage", "mapped-file-size"},
		{"verify", "records"}, {"scan", "records"}, {"verify", "index-slots"}, {"rebuild-index", "index-slots"},
	} {
		c, _, err := root.Find([]string{want.cmd})
		if err != nil || c.Flags().Lookup(want.flag) == nil {
			t.Errorf("%s has no --%s", want.cmd, want.flag)
		}
	}

	rocket := filepath.Join(testutil.Untar(t, testutil.Testdata("rocketmq", "rmq533-c-stale.tar.gz")), "store")
	rabbit := filepath.Join(testutil.Untar(t, testutil.Testdata("rabbitmq", "datasets", "crash-mid-write-confirmed.tar.gz")), "rmqfix@localhost")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"verify", "--broker-version", "3.13.7", rocket}, "--broker-version (rabbitmq only) does not apply to a rocketmq store"},
		{[]string{"salvage", "--broker-version", "3.13.7", "--out", filepath.Join(t.TempDir(), "x"), rocket}, "--broker-version (rabbitmq only)"},
		{[]string{"truncate", "--mapped-file-size", "1024", rabbit}, "--mapped-file-size (rocketmq only) does not apply to a rabbitmq store"},
		{[]string{"scan", "--max-message-size", "100", rabbit}, "--max-message-size (rocketmq only)"},
		{[]string{"verify", "--index-slots", "5", "-o", "jsonl", rabbit}, "--index-slots (rocketmq only)"},
		{[]string{"verify", "--broker-config", "/dev/null", rabbit}, "--broker-config (rocketmq only)"},
	} {
		code, out, errOut := runCLI(t, c.args...)
		if code != exitUsage || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: exit %d, stderr %q (want %q)", c.args, code, errOut, c.want)
		}
		if c.args[len(c.args)-2] == "jsonl" && !strings.Contains(out, `"exit_code":2`) {
			t.Errorf("%v: jsonl without the exit code: %s", c.args, out)
		}
	}
	// The same flag applies: --records on verify lists the records, and
	// --max-message-size reaches the RocketMQ scanner of verify too.
	code, out, _ := runCLI(t, "verify", "--records", "-o", "jsonl", rocket)
	if code != exitFindings || strings.Count(out, `"type":"record"`) == 0 {
		t.Errorf("verify --records: exit %d, %d records", code, strings.Count(out, `"type":"record"`))
	}
	_, small, _ := runCLI(t, "verify", "--max-message-size", "64", "-o", "jsonl", rocket)
	if small == out || strings.Count(small, `"type":"record"`) != 0 {
		t.Errorf("verify --max-message-size 64 read the store as without it")
	}
}

// TestMakeInstall: `make install PREFIX=...` installs the binary, one man
// page per command and the bash, zsh and fish completions; the installed
// bash completion works when sourced.
func TestMakeInstall(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	if _, err := exec.LookPath("make"); err != nil {
		testutil.RequireReal(t, "make")
	}
	tmp := t.TempDir()
	prefix := filepath.Join(tmp, "prefix")
	cmd := exec.Command("make", "-C", testutil.RepoRoot(), "install", "PREFIX="+prefix,
		"BIN="+filepath.Join(tmp, "storectl"), "GENDIR="+filepath.Join(tmp, "gen"), "VERSION=9.9.9-test")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make install: %v\n%s", err, out)
	}
	bin := filepath.Join(prefix, "bin", "storectl")
	out, err := exec.Command(bin, "--version").Output()
	if err != nil || !strings.HasPrefix(string(out), "storectl 9.9.9-test (schema") {
		t.Fatalf("installed binary --version: %q %v", out, err)
	}
	root := newRootCmd(newEnv(Streams{}))
	var walk func(c *cobra.Command)
	pages := 0
	walk = func(c *cobra.Command) {
		if c.Hidden || c.Name() == "help" {
			return
		}
		page := filepath.Join(prefix, "share", "man", "man1", strings.ReplaceAll(c.CommandPath(), " ", "-")+".1")
		b, err := os.ReadFile(page)
		if err != nil || !strings.Contains(string(b), ".TH \"STORECTL\" \"1\"") {
			t.Errorf("%s: no man page (%v)", c.CommandPath(), err)
		}
		pages++
		for _, s := range c.Commands() {
			walk(s)
		}
	}
	walk(root)
	verify, _ := os.ReadFile(filepath.Join(prefix, "share", "man", "man1", "storectl-verify.1"))
	for _, want := range []string{"EXAMPLE", "fail-on", "Exit codes"} {
		if !strings.Contains(string(verify), want) {
			t.Errorf("storectl-verify.1 lacks %q", want)
		}
	}
	for _, p := range []string{"share/bash-completion/completions/storectl", "share/zsh/site-functions/_storectl", "share/fish/vendor_completions.d/storectl.fish"} {
		if st, err := os.Stat(filepath.Join(prefix, p)); err != nil || st.Size() == 0 {
			t.Errorf("%s not installed: %v", p, err)
		}
	}
	c := exec.Command("bash", "-c", "source "+filepath.Join(prefix, "share/bash-completion/completions/storectl")+" && complete -p storectl")
	if out, err := c.CombinedOutput(); err != nil || !strings.Contains(string(out), "__start_storectl") {
		t.Errorf("installed bash completion: %v %s", err, out)
	}
	t.Logf("%d man pages", pages)
}
