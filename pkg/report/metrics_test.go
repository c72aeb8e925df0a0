package report

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
)

func TestMetricsFileParsesAsPrometheusText(t *testing.T) {
	path := filepath.Join(t.TempDir(), "storectl.prom")
	end := int64(1035659)
	m := Metrics{Command: "verify", Store: "rocketmq", DataDir: `/data/st"ore`, Now: time.Unix(1700000000, 0),
		Summary: Summary{ExitCode: 1, Counts: map[string]int{"error": 13, "warning": 0, "info": 2},
			Codes:        map[string]int{"rocketmq.commitlog.stale-record": 13, "rocketmq.checkpoint.abort": 2},
			BytesScanned: 1048576, DurationMS: 1500, RecoveryEnd: &end}}
	if err := WriteMetricsFile(path, m); err != nil {
		t.Fatal(err)
	}
	parse := func() map[string]float64 {
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		var p expfmt.TextParser
		fams, err := p.TextToMetricFamilies(f)
		if err != nil {
			t.Fatalf("not Prometheus text format: %v", err)
		}
		out := map[string]float64{}
		for name, fam := range fams {
			for _, mt := range fam.GetMetric() {
				key := name
				for _, l := range mt.GetLabel() {
					if l.GetName() == "code" || l.GetName() == "severity" {
						key += "/" + l.GetValue()
					}
				}
				out[key] = mt.GetGauge().GetValue()
			}
		}
		return out
	}
	got := parse()
	for k, want := range map[string]float64{
		"storectl_findings/rocketmq.commitlog.stale-record": 13,
		"storectl_findings_by_severity/error":               13,
		"storectl_bytes_scanned":                            1048576,
		"storectl_duration_seconds":                         1.5,
		"storectl_exit_code":                                1,
		"storectl_recovery_end_bytes":                       1035659,
		"storectl_last_success_timestamp_seconds":           1700000000,
	} {
		if got[k] != want {
			t.Errorf("%s = %v, want %v", k, got[k], want)
		}
	}
	// A failed (incomplete) run keeps the previous last-success time.
	m.Summary.ExitCode, m.Summary.Incomplete, m.Now = 3, true, time.Unix(1700000600, 0)
	if err := WriteMetricsFile(path, m); err != nil {
		t.Fatal(err)
	}
	got = parse()
	if got["storectl_last_success_timestamp_seconds"] != 1700000000 || got["storectl_last_run_timestamp_seconds"] != 1700000600 || got["storectl_incomplete"] != 1 {
		t.Fatalf("after a failed run: %v", got)
	}
	ents, _ := os.ReadDir(filepath.Dir(path))
	for _, e := range ents {
		if strings.Contains(e.Name(), ".tmp") {
			t.Fatalf("temp file left behind: %s", e.Name())
		}
	}
}
