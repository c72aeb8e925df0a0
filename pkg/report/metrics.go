package report

import (
	"bufio"
	"bytes"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Metrics is what WriteMetricsFile needs to describe one run.
type Metrics struct {
	Command string
	Store   string
	DataDir string
	Summary Summary
	Now     time.Time
}

// WriteMetricsFile writes a Prometheus text-format file for
// node_exporter's textfile collector: findings by code and severity,
// bytes scanned, duration, exit code, and the time of the last run and of
// the last successful (exit 0 or 1, i.e. complete) run. The file is
// written to a temp file and renamed, so the collector never reads half a
// file; the last-success time survives failed runs.
func WriteMetricsFile(path string, m Metrics) error {
	s := m.Summary
	lastSuccess := previousValue(path, "storectl_last_success_timestamp_seconds")
	ok := !s.Incomplete && (s.ExitCode == 0 || s.ExitCode == 1)
	if ok {
		lastSuccess = fmt.Sprintf("%d", m.Now.Unix())
	}
	base := fmt.Sprintf(`command=%q,store=%q,data_dir=%q`, m.Command, m.Store, m.DataDir)
	var b bytes.Buffer
	gauge := func(name, help string) {
		fmt.Fprintf(&b, "# HELP %s %s\n# TYPE %s gauge\n", name, help, name)
	}
	gauge("storectl_findings", "Findings of the last run by code and severity.")
	for _, c := range slices.Sorted(maps.Keys(s.Codes)) {
		fmt.Fprintf(&b, "storectl_findings{%s,code=%q} %d\n", base, c, s.Codes[c])
	}
	gauge("storectl_findings_by_severity", "Findings of the last run by severity.")
	for _, sev := range []string{"error", "warning", "info"} {
		fmt.Fprintf(&b, "storectl_findings_by_severity{%s,severity=%q} %d\n", base, sev, s.Counts[sev])
	}
	if bl := s.Baseline; bl != nil {
		gauge("storectl_findings_new", "Findings of the last run that its baseline (verify --baseline) did not have.")
		fmt.Fprintf(&b, "storectl_findings_new{%s} %d\n", base, bl.New)
		gauge("storectl_findings_persistent", "Findings of the last run that its baseline had too.")
		fmt.Fprintf(&b, "storectl_findings_persistent{%s} %d\n", base, bl.Persistent)
		gauge("storectl_findings_resolved", "Findings of the baseline that the last run no longer reported.")
		fmt.Fprintf(&b, "storectl_findings_resolved{%s} %d\n", base, bl.Resolved)
	}
	gauge("storectl_bytes_scanned", "Bytes read by the last run.")
	fmt.Fprintf(&b, "storectl_bytes_scanned{%s} %d\n", base, s.BytesScanned)
	gauge("storectl_duration_seconds", "Wall-clock duration of the last run.")
	fmt.Fprintf(&b, "storectl_duration_seconds{%s} %g\n", base, float64(s.DurationMS)/1000)
	gauge("storectl_exit_code", "Exit code of the last run (see storectl --help).")
	fmt.Fprintf(&b, "storectl_exit_code{%s} %d\n", base, s.ExitCode)
	gauge("storectl_incomplete", "1 when the last run could not look at everything.")
	fmt.Fprintf(&b, "storectl_incomplete{%s} %d\n", base, boolInt(s.Incomplete))
	if s.RecoveryEnd != nil {
		gauge("storectl_recovery_end_bytes", "RocketMQ: physical offset where a correct recovery stops.")
		fmt.Fprintf(&b, "storectl_recovery_end_bytes{%s} %d\n", base, *s.RecoveryEnd)
	}
	gauge("storectl_last_run_timestamp_seconds", "Unix time of the last run.")
	fmt.Fprintf(&b, "storectl_last_run_timestamp_seconds{%s} %d\n", base, m.Now.Unix())
	if lastSuccess != "" {
		gauge("storectl_last_success_timestamp_seconds", "Unix time of the last run that completed (exit 0 or 1).")
		fmt.Fprintf(&b, "storectl_last_success_timestamp_seconds{%s} %s\n", base, lastSuccess)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	if _, err := tmp.Write(b.Bytes()); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return err
	}
	if err := tmp.Sync(); err != nil { // the rename must not publish an empty file after a crash
		tmp.Close()
		os.Remove(tmp.Name())
		return err
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return err
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// previousValue returns the value of the first sample of metric in an
// existing file, or "".
func previousValue(path, metric string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		l := sc.Text()
		if strings.HasPrefix(l, metric+"{") || strings.HasPrefix(l, metric+" ") {
			if i := strings.LastIndexByte(l, ' '); i > 0 {
				return l[i+1:]
			}
		}
	}
	return ""
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
