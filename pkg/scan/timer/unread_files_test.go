package timer

import (
	"encoding/json"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/storectl/storectl/pkg/scan"
)

// TestUnreadTimerFiles: the checkpoint, the wheel or the metrics that
// cannot be read (a directory or a FIFO in its place) are named unread
// (storectl.file.unreadable), the result is incomplete, and nothing is
// concluded from their absence: every finding but the unread file's and
// the recovery plan is one the intact store's scan gives too, and when the
// prediction reads the file (checkpoint, wheel) it is not made (no lost or
// duplicate deliveries; the plan is unknown and waits on the file). On T1-T3.
func TestUnreadTimerFiles(t *testing.T) {
	for _, c := range []struct {
		ds    string
		nowMs int64
	}{{"t1-clean", 1796163834084}, {"t2-kill", 1796163902000}, {"t3-cltrunc", 1796163964732}} {
		for _, rel := range []string{CheckFile, WheelFile, MetricsFile} {
			for _, kind := range []string{"dir", "fifo"} {
				t.Run(c.ds+"/"+rel+"/"+kind, func(t *testing.T) {
					now := time.UnixMilli(c.nowMs)
					intact, err := Scan(t.Context(), Config{Root: fixture(t, c.ds), RecoveryEnd: -1, Now: now}, scan.Options{})
					if err != nil {
						t.Fatal(err)
					}
					had := map[string]bool{}
					var plan scan.Finding
					for _, f := range intact.Findings {
						b, _ := json.Marshal(f)
						had[string(b)] = true
						if f.Code == CodeRecoveryPlan {
							plan = f
						}
					}
					store := private(t, c.ds)
					p := filepath.Join(store, filepath.FromSlash(rel))
					if err := os.Remove(p); err != nil && !os.IsNotExist(err) {
						t.Fatal(err)
					}
					if kind == "dir" {
						err = os.Mkdir(p, 0o755)
					} else {
						err = syscall.Mkfifo(p, 0o644)
					}
					if err != nil {
						t.Fatal(err)
					}
					res := scanInTime(t, Config{Root: store, RecoveryEnd: -1, Now: now})
					if !res.Incomplete {
						t.Error("not incomplete")
					}
					predicts := rel != MetricsFile
					named := false
					for _, f := range res.Findings {
						b, _ := json.Marshal(f)
						switch {
						case f.Code == scan.CodeUnreadable:
							named = named || f.Path == rel
						case f.Code == scan.CodeNotRegular && f.Path == rel:
						case f.Code == CodeRecoveryPlan && predicts:
							if f.Details["unknown"] != true || f.Details["waits_on"].([]string)[0] != rel {
								t.Errorf("the recovery plan is not unknown, waiting on %s: %s", rel, f.Message)
							}
						case f.Code == CodeRecoveryPlan:
							if f.Message != plan.Message {
								t.Errorf("with the metrics unread the plan changed:\n%s\nintact: %s", f.Message, plan.Message)
							}
						case !had[string(b)]:
							t.Errorf("a finding the intact store's scan does not give: %s", b)
						}
						if predicts && (f.Code == CodeLost || f.Code == CodeDuplicate) {
							t.Errorf("%s with %s unread", f.Code, rel)
						}
					}
					if !named {
						t.Errorf("no %s finding names %s", scan.CodeUnreadable, rel)
					}
				})
			}
		}
	}
}
