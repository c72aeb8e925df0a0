package main

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/creack/pty"
	"github.com/rogpeppe/go-internal/testscript"

	"github.com/storectl/storectl/internal/testutil"
)

var ansi = regexp.MustCompile("\x1b\\[[0-9;]*m")

var verdictWord = regexp.MustCompile(`^(clean|problems found|incomplete|no new problems|usage error|refused|apply failed): .*\(exit \d+\)$|^(clean|problems found|incomplete|no new problems|usage error|refused|apply failed): `)

// checkText checks the answer-first layout of a text report at width
// columns and returns what is wrong with it ("" when nothing): no line
// wider than the width; the verdict on line 1; the first next command by
// line 5; warnings and errors grouped by code and file; with maps, a map
// for a damaged file that fills the width.
func checkText(text string, width int, maps bool) string {
	text = ansi.ReplaceAllString(text, "")
	lines := strings.Split(strings.TrimRight(text, "\n"), "\n")
	for i, l := range lines {
		if n := utf8.RuneCountInString(l); n > width {
			return "line " + strconv.Itoa(i+1) + " is " + strconv.Itoa(n) + " wide: " + l
		}
	}
	if !verdictWord.MatchString(lines[0]) {
		return "line 1 is not a verdict: " + lines[0]
	}
	next := -1
	for i, l := range lines[:min(5, len(lines))] {
		if strings.HasPrefix(l, "next: ") {
			next = i
			break
		}
	}
	if next < 0 {
		return "no next command in the first 5 lines"
	}
	if strings.Contains(text, "\n  error ") || strings.Contains(text, "\n  warning ") {
		if !regexp.MustCompile(`(?m)^findings \(\d+, in \d+ group\(s\) by code and file; -v lists each\):$`).MatchString(text) ||
			!regexp.MustCompile(`(?m)^  (error|warning) +×\d+ \S+`).MatchString(text) {
			return "findings are not grouped by code and file"
		}
	}
	if maps {
		m := regexp.MustCompile(`(?m)^  \[([ =0STX]+)\]$`).FindAllStringSubmatch(text, -1)
		if len(m) == 0 || !strings.Contains(text, "\nfile maps (") {
			return "no file map"
		}
		for _, x := range m {
			if len(x[1]) != width-4 || !strings.ContainsAny(x[1], "0STX") {
				return "a file map of " + strconv.Itoa(len(x[1])) + " cells (want " + strconv.Itoa(width-4) + ") showing no damage: " + x[1]
			}
		}
	}
	return ""
}

// textcheck WIDTH [maps]: checkText on the last command's stdout.
func cmdTextCheck(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 1 {
		ts.Fatalf("usage: textcheck WIDTH [maps]")
	}
	w, err := strconv.Atoi(args[0])
	if err != nil {
		ts.Fatalf("textcheck: %v", err)
	}
	if msg := checkText(ts.ReadFile("stdout"), w, len(args) > 1 && args[1] == "maps"); msg != "" {
		ts.Fatalf("textcheck %d: %s\n%s", w, msg, ts.ReadFile("stdout"))
	}
}

// textgolden NAME: the last stdout is testdata/golden/NAME.txt
// (rewritten with -update), line for line, with $GOLDENDIR (see
// goldendir) written as goldenPlaceholder, a path of the same length, so
// the lines break where they broke. Without goldendir the work dir's
// name changes length from run to run, which moves line breaks (and can
// break a long path at another character): then $WORK stands for it and
// both sides are compared without their white space.
func cmdTextGolden(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: textgolden NAME")
	}
	got, exact := ts.ReadFile("stdout"), false
	if g := ts.Getenv("GOLDENDIR"); g != "" {
		got, exact = strings.ReplaceAll(got, g, goldenPlaceholder), true
	} else {
		got = withWork(got, ts.Getenv("WORK"))
	}
	p := filepath.Join(testutil.RepoRoot(), "cmd", "storectl", "testdata", "golden", args[0]+".txt")
	if *update {
		if err := os.WriteFile(p, []byte(got), 0o644); err != nil {
			ts.Fatalf("%v", err)
		}
		return
	}
	want, err := os.ReadFile(p)
	if err != nil {
		ts.Fatalf("%v (run with -update to create it)", err)
	}
	if exact && string(want) != got || !exact && noSpace(string(want)) != noSpace(got) {
		ts.Fatalf("text report differs from %s (run with -update to accept):\n--- want\n%s\n--- got\n%s", p, want, got)
	}
}

// goldenPlaceholder is how goldens write $GOLDENDIR.
const goldenPlaceholder = "/tmp/storectl-golden-XXXXXXXX"

// goldendir: make $GOLDENDIR, a path of the same length on every machine
// and run (/tmp/storectl-golden-XXXXXXXX), a symlink to the work dir, for
// the script to cd into. The reports then name the data dirs by paths of
// a fixed length, so what fits a line (a next command's comment) does not
// change with the length of $TMPDIR or of the work dir's random name.
func cmdGoldenDir(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 0 {
		ts.Fatalf("usage: goldendir")
	}
	var link string
	for i := 0; ; i++ {
		link = fmt.Sprintf("/tmp/storectl-golden-%08x", rand.Uint32())
		err := os.Symlink(ts.Getenv("WORK"), link)
		if err == nil {
			break
		}
		if !os.IsExist(err) || i > 100 {
			ts.Fatalf("goldendir: %v", err)
		}
	}
	ts.Defer(func() { os.Remove(link) })
	ts.Setenv("GOLDENDIR", link)
}

// withWork replaces the work dir in a report with $WORK, also where the
// report broke the path across lines (the break goes with it).
func withWork(s, work string) string {
	var re strings.Builder
	for i, r := range work {
		if i > 0 {
			re.WriteString(`(?:\n +)?`)
		}
		re.WriteString(regexp.QuoteMeta(string(r)))
	}
	return regexp.MustCompile(re.String()).ReplaceAllLiteralString(s, "$WORK")
}

// noSpace is s without its white space.
func noSpace(s string) string {
	return strings.Join(strings.Fields(s), "")
}

// TestTextUnderTerminal runs storectl verify of the demo RocketMQ store
// and of the RabbitMQ 3.10.8 mid-write crash under a pseudo-terminal of 80
// columns (no $COLUMNS: the width comes from the terminal) and checks the
// same layout as the goldens (checkText: no line wider than 80, the
// verdict on line 1, the next command by line 5, findings grouped, a map
// per damaged file), in color and with the scan's duration.
func TestTextUnderTerminal(t *testing.T) {
	for _, fx := range []struct{ tgz, dir string }{
		{testutil.Testdata("rocketmq", "rmq533-c-stale.tar.gz"), "store"},
		{testutil.Testdata("rabbitmq", "datasets", "crash-mid-write-confirmed.tar.gz"), "rmqfix@localhost"},
	} {
		t.Run(fx.dir, func(t *testing.T) { textUnderTerminal(t, filepath.Join(testutil.Untar(t, fx.tgz), fx.dir)) })
	}
}

func textUnderTerminal(t *testing.T, store string) {
	bin := testBinary(t)
	cmd := exec.Command(bin, "verify", store)
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "COLUMNS=") && !strings.HasPrefix(kv, "NO_COLOR=") && !strings.HasPrefix(kv, "TERM=") {
			env = append(env, kv)
		}
	}
	cmd.Env = append(env, "TERM=xterm")
	f, err := pty.StartWithSize(cmd, &pty.Winsize{Cols: 80, Rows: 50})
	if err != nil {
		t.Skipf("no pseudo-terminal: %v", err)
	}
	defer f.Close()
	var b strings.Builder
	done := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			// A terminal returns to the line's start at \r: what is
			// after the last one is what shows (the progress bar, on
			// stderr, clears itself that way).
			l := strings.TrimRight(sc.Text(), "\r")
			if i := strings.LastIndexByte(l, '\r'); i >= 0 {
				l = l[i+1:]
			}
			b.WriteString(l + "\n")
		}
		close(done)
	}()
	werr := cmd.Wait()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
	}
	out := b.String()
	if ee, ok := werr.(*exec.ExitError); !ok || ee.ExitCode() != exitFindings {
		t.Fatalf("exit: %v\n%s", werr, out)
	}
	if !strings.Contains(out, "\x1b[") {
		t.Errorf("no color on a terminal:\n%s", out)
	}
	if msg := checkText(out, 80, true); msg != "" {
		t.Fatalf("%s\n%s", msg, out)
	}
	if !regexp.MustCompile(`scanned in \d+ ms`).MatchString(out) {
		t.Errorf("no duration on a terminal:\n%s", out)
	}
}
