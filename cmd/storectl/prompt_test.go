package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/storectl/storectl/internal/testutil"
)

// TestApplyAsksOnceOnATerminal: on a TTY, --apply without --yes asks one
// question on stderr; "n" (or nothing) refuses with 4 and writes nothing,
// "y" applies.
func TestApplyAsksOnceOnATerminal(t *testing.T) {
	store := filepath.Join(testutil.Untar(t, testutil.Testdata("rocketmq", "rmq533-c-stale.tar.gz")), "store")
	before := testutil.TreeHash(t, store)
	ask := func(answer string) (int, string, string) {
		var out, errOut bytes.Buffer
		code := run(context.Background(), []string{"truncate", "--apply", "--backup-dir", filepath.Join(t.TempDir(), "bk"), store},
			Streams{In: strings.NewReader(answer), Out: &out, ErrOut: &errOut, InTTY: true, Getenv: func(string) string { return "" }})
		return code, out.String(), errOut.String()
	}
	for _, no := range []string{"n\n", "\n", ""} {
		code, _, errOut := ask(no)
		if code != exitRefused || strings.Count(errOut, "[y/N]") != 1 {
			t.Fatalf("answer %q: exit %d, stderr %q", no, code, errOut)
		}
		testutil.SameTree(t, before, testutil.TreeHash(t, store))
	}
	code, out, errOut := ask("y\n")
	if code != exitOK || strings.Count(errOut, "[y/N]") != 1 || !strings.Contains(out, "applied and re-verified clean") {
		t.Fatalf("answer y: exit %d\n%s\n%s", code, out, errOut)
	}
}

// TestMaxTruncateBytes: a plan that removes more than the cap is refused
// before anything is written.
func TestMaxTruncateBytes(t *testing.T) {
	store := filepath.Join(testutil.Untar(t, testutil.Testdata("rocketmq", "rmq533-c-stale.tar.gz")), "store")
	before := testutil.TreeHash(t, store)
	code, out, _ := runCLI(t, "truncate", "--apply", "--yes", "--max-truncate-bytes", "100", "-o", "jsonl", store)
	if code != exitRefused || !strings.Contains(out, "limit") {
		t.Fatalf("exit %d\n%s", code, out)
	}
	testutil.SameTree(t, before, testutil.TreeHash(t, store))
	// 11874 bytes are zeroed for c-stale 5.3.3: a cap above it passes.
	if code, out, _ := runCLI(t, "truncate", "--apply", "--yes", "--max-truncate-bytes", "20000", "--backup-dir", filepath.Join(t.TempDir(), "bk"), store); code != exitOK {
		t.Fatalf("exit %d with a cap above the plan\n%s", code, out)
	}
}

// TestProgressPlain: --progress plain writes progress lines to stderr
// (never stdout) and ends with the full byte count.
func TestProgressPlain(t *testing.T) {
	store := filepath.Join(testutil.Untar(t, testutil.Testdata("rocketmq", "rmq533-a-clean.tar.gz")), "store")
	code, out, errOut := runCLI(t, "scan", "--progress", "plain", "-o", "jsonl", store)
	if code != exitOK || !strings.Contains(errOut, "storectl: progress 1048576/1048576 bytes (100%)") || strings.Contains(out, "progress") {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	_, _, errOut = runCLI(t, "scan", "--progress", "none", store)
	if strings.Contains(errOut, "progress") {
		t.Fatalf("--progress none printed progress: %s", errOut)
	}
}

// TestProgressBarOnlyOnATerminal: --progress auto draws a bar on stderr
// when stderr is a terminal, and nothing otherwise; stdout stays the report.
func TestProgressBarOnlyOnATerminal(t *testing.T) {
	store := filepath.Join(testutil.Untar(t, testutil.Testdata("rocketmq", "rmq533-a-clean.tar.gz")), "store")
	scanWith := func(errTTY bool) (string, string) {
		var out, errOut bytes.Buffer
		code := run(context.Background(), []string{"scan", "-o", "jsonl", store},
			Streams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut, ErrTTY: errTTY, Getenv: func(string) string { return "" }})
		if code != exitOK {
			t.Fatalf("exit %d", code)
		}
		return out.String(), errOut.String()
	}
	out, errOut := scanWith(true)
	if !strings.Contains(errOut, "scanning") || strings.Contains(out, "scanning") {
		t.Fatalf("no bar on a terminal stderr:\nstderr %q", errOut)
	}
	if _, errOut := scanWith(false); errOut != "" {
		t.Fatalf("progress off a terminal: %q", errOut)
	}
}
