package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/common/expfmt"

	"github.com/storectl/storectl/internal/testutil"
)

// readMetrics parses a --metrics-file with the Prometheus text parser and
// returns storectl_exit_code and storectl_incomplete (one sample each).
func readMetrics(t *testing.T, path string) (code, incomplete float64, labels map[string]string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var p expfmt.TextParser
	fams, err := p.TextToMetricFamilies(f)
	if err != nil {
		t.Fatalf("%s is not Prometheus text format: %v", path, err)
	}
	get := func(name string) float64 {
		fam := fams[name]
		if fam == nil || len(fam.GetMetric()) != 1 {
			t.Fatalf("%s: want one %s sample, have %v", path, name, fam)
		}
		m := fam.GetMetric()[0]
		labels = map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		return m.GetGauge().GetValue()
	}
	return get("storectl_exit_code"), get("storectl_incomplete"), labels
}

// TestMetricsEveryExit: with --metrics-file every run rewrites the file
// (temp + rename) with its own storectl_exit_code, whatever the exit:
// 0, 1, 2 (missing dir, unknown command, bad flag), 3 (a file nobody may
// read), 4 (--apply without --yes off a TTY) and 130 (interrupted). A
// path that cannot be written is exit 2 before any scanning.
func TestMetricsEveryExit(t *testing.T) {
	base, err := os.MkdirTemp("", "storectl-metrics-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	for _, tgz := range []string{"rmq533-a-clean.tar.gz", "rmq533-c-stale.tar.gz"} {
		dir := filepath.Join(base, strings.TrimSuffix(tgz, ".tar.gz"))
		if err := testutil.UntarTo(testutil.Testdata("rocketmq", tgz), dir); err != nil {
			t.Fatal(err)
		}
	}
	_ = filepath.Walk(base, func(p string, info os.FileInfo, err error) error {
		if err == nil {
			os.Chmod(p, map[bool]os.FileMode{true: 0o777, false: 0o644}[info.IsDir()])
		}
		return nil
	})
	clean := filepath.Join(base, "rmq533-a-clean", "store")
	stale := filepath.Join(base, "rmq533-c-stale", "store")
	locked := filepath.Join(base, "locked")
	if err := os.CopyFS(locked, os.DirFS(clean)); err != nil {
		t.Fatal(err)
	}
	_ = filepath.Walk(locked, func(p string, info os.FileInfo, err error) error {
		if err == nil {
			os.Chmod(p, map[bool]os.FileMode{true: 0o755, false: 0o644}[info.IsDir()])
		}
		return nil
	})
	if err := os.Chmod(filepath.Join(locked, "commitlog", "00000000000000262144"), 0); err != nil {
		t.Fatal(err)
	}
	outDir := filepath.Join(base, "textfile")
	if err := os.Mkdir(outDir, 0o777); err != nil {
		t.Fatal(err)
	}
	os.Chmod(outDir, 0o777)
	prom := filepath.Join(outDir, "storectl.prom")
	interrupted := func(t *testing.T, args ...string) (int, string, string) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		var out, errOut bytes.Buffer
		code := run(ctx, args, Streams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut, Getenv: func(string) string { return "" }})
		return code, out.String(), errOut.String()
	}
	cases := []struct {
		name string
		run  func(*testing.T, ...string) (int, string, string)
		args []string
		want int
	}{
		{"clean", runCLI, []string{"verify", clean}, exitOK},
		{"stale", runCLI, []string{"verify", stale}, exitFindings},
		{"missing dir", runCLI, []string{"verify", filepath.Join(base, "nope")}, exitUsage},
		{"clean again", runCLI, []string{"verify", clean}, exitOK},
		{"unknown command", runCLI, []string{"verfy", clean}, exitUsage},
		{"bad flag", runCLI, []string{"verify", "--bogus", clean}, exitUsage},
		{"unreadable commitlog", runAsNobody, []string{"verify", locked}, exitIncomplete},
		{"apply without --yes", runCLI, []string{"truncate", "--apply", stale}, exitRefused},
		{"interrupted", interrupted, []string{"verify", clean}, exitInterrupted},
		{"clean at last", runCLI, []string{"verify", clean}, exitOK},
	}
	for _, c := range cases {
		code, out, errOut := c.run(t, append(append([]string{}, c.args...), "--metrics-file", prom, "-o", "jsonl")...)
		if code != c.want {
			t.Fatalf("%s: exit %d, want %d\n%s\n%s", c.name, code, c.want, out, errOut)
		}
		got, inc, labels := readMetrics(t, prom)
		if int(got) != c.want {
			t.Fatalf("%s: storectl_exit_code %v after exit %d", c.name, got, code)
		}
		if wantInc := c.want == exitIncomplete || c.want == exitInterrupted; (inc == 1) != wantInc {
			t.Fatalf("%s: storectl_incomplete %v after exit %d", c.name, inc, code)
		}
		if labels["command"] != c.args[0] {
			t.Fatalf("%s: command label %q", c.name, labels["command"])
		}
		if left, _ := filepath.Glob(filepath.Join(outDir, ".*")); len(left) != 0 {
			t.Fatalf("%s: temp files left beside the metrics file: %v", c.name, left)
		}
	}
	// Unwritable paths: usage errors found before any scanning (the
	// summary has read nothing), and the old file stays as it was.
	before, _ := os.ReadFile(prom)
	for _, p := range []string{filepath.Join(base, "no-such-dir", "m.prom"), outDir} {
		code, out, _ := runCLI(t, "verify", clean, "--metrics-file", p, "-o", "jsonl")
		objs := jsonlObjects(t, out)
		sum := objs[len(objs)-1]
		if code != exitUsage || sum["bytes_scanned"].(float64) != 0 || !strings.Contains(out, "--metrics-file") {
			t.Fatalf("--metrics-file %s: exit %d, summary %v", p, code, sum)
		}
	}
	if after, _ := os.ReadFile(prom); !bytes.Equal(before, after) {
		t.Fatal("a run with another, unwritable metrics path changed the metrics file")
	}
}
