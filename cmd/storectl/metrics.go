package main

// --metrics-file: a Prometheus textfile-collector file that every run
// rewrites (temp file + rename), whatever its exit code, so that
// storectl_exit_code is the last run's and an alert on it fires when a
// run fails before, during or after its scan. A path that cannot be
// written is a usage error found before any scanning.

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/storectl/storectl/pkg/report"
)

// metricsPath is --metrics-file (flag > STORECTL_METRICS_FILE > config);
// when the flags did not parse, it is looked for in the raw arguments.
func (e *Env) metricsPath(args []string) string {
	if e.cmd != nil {
		if p := e.Config.GetString("metrics-file"); p != "" {
			return p
		}
	}
	p := e.Streams.Getenv("STORECTL_METRICS_FILE")
	for i, a := range args {
		switch {
		case a == "--":
			return p
		case a == "--metrics-file" && i+1 < len(args):
			p = args[i+1]
		case strings.HasPrefix(a, "--metrics-file="):
			p = strings.TrimPrefix(a, "--metrics-file=")
		}
	}
	return p
}

// checkMetricsPath fails when path cannot be written: its dir must take
// a new file (the temp file renamed over it) and path must not be a
// directory. It asks the kernel (access(2) with the effective ids) and
// writes nothing: the path is not yet known to be outside the data dir
// (checkOutputs).
func checkMetricsPath(path string) error {
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		return fmt.Errorf("--metrics-file %s: is a directory", path)
	}
	dir := filepath.Dir(path)
	if st, err := os.Stat(dir); err != nil {
		return fmt.Errorf("--metrics-file %s: cannot write there: %w", path, errors.Unwrap(err))
	} else if !st.IsDir() {
		return fmt.Errorf("--metrics-file %s: %s is not a directory", path, dir)
	}
	if err := unix.Faccessat(unix.AT_FDCWD, dir, unix.W_OK|unix.X_OK, unix.AT_EACCESS); err != nil {
		return fmt.Errorf("--metrics-file %s: cannot write there: %w", path, err)
	}
	return nil
}

// writeMetrics writes the metrics file once per run, for the exit code
// and summary the run ends with; a run with no session (a usage error
// before any report) gets a summary of its exit code alone.
func (e *Env) writeMetrics(args []string, code int, sum *report.Summary) error {
	if e.metricsDone {
		return nil
	}
	path := e.metricsPath(args)
	if path == "" {
		return nil
	}
	e.metricsDone = true
	m := report.Metrics{Command: commandName(args), Now: time.Now()}
	if s := e.session; s != nil {
		m.Store, m.DataDir = s.run.Store, s.run.DataDir
		if len(s.run.Args) == 1 {
			m.DataDir = absOr(s.run.Args[0])
		}
	} else if e.cmd != nil && len(e.cmd.Flags().Args()) == 1 {
		m.DataDir = absOr(e.cmd.Flags().Args()[0])
	}
	if sum != nil {
		m.Summary = *sum
	} else {
		m.Summary = report.Summary{Counts: map[string]int{"error": 0, "warning": 0, "info": 0}, Codes: map[string]int{}}
	}
	m.Summary.ExitCode = code
	m.Summary.Incomplete = m.Summary.Incomplete || code == exitIncomplete || code == exitInterrupted
	return report.WriteMetricsFile(path, m)
}

// commandName is the command the arguments name ("storectl" for none).
func commandName(args []string) string {
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		return args[0]
	}
	return "storectl"
}

func absOr(p string) string {
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return p
}
