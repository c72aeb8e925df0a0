package timer

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/storectl/storectl/pkg/scan"
	rmqscan "github.com/storectl/storectl/pkg/scan/rocketmq"
)

// TestRecoveryEndUnknown: when the commitlog's recovery end is only a
// lower bound (a commitlog file could not be read in full), the units at
// or past it are unknown, not beyond the end or lost: one
// target-unknown finding counts them, the next start is not predicted,
// and every other finding is the one the same scan gives with the end
// known. On T1-T3, with the end at the real recovery end, half of it and
// 0.
func TestRecoveryEndUnknown(t *testing.T) {
	const waits = "commitlog/00000000000000000000"
	// The codes a known end decides (per unit, or through the prediction).
	decided := map[string]bool{CodeUnitBeyondEnd: true, CodeUnitAtRecoveryEnd: true, CodeLost: true, CodeDuplicate: true,
		CodeCheckAheadCQ: true, CodeRecoveryPlan: true}
	for _, c := range []struct {
		ds    string
		nowMs int64
	}{{"t1-clean", 1796163834084}, {"t2-kill", 1796163902000}, {"t3-cltrunc", 1796163964732}} {
		store := fixture(t, c.ds)
		cl, err := rmqscan.ScanCommitLog(context.Background(), rmqscan.Config{Root: store}, scan.Options{})
		if err != nil {
			t.Fatal(err)
		}
		real := *cl.RecoveryEnd
		for _, end := range []int64{real, real / 2, 0} {
			t.Run(fmt.Sprintf("%s/end=%d", c.ds, end), func(t *testing.T) {
				cfg := Config{Root: store, RecoveryEnd: end, Now: time.UnixMilli(c.nowMs), MaxFindings: 1 << 20}
				known, err := Scan(context.Background(), cfg, scan.Options{})
				if err != nil {
					t.Fatal(err)
				}
				cfg.RecoveryEndUnknown = waits
				res, err := Scan(context.Background(), cfg, scan.Options{})
				if err != nil {
					t.Fatal(err)
				}
				ks, us := known.Extra["timer"].(*Summary), res.Extra["timer"].(*Summary)
				want := map[string]int{}
				kept := map[string]bool{}
				for _, f := range known.Findings {
					if decided[f.Code] {
						want[f.Code]++
						continue
					}
					b, _ := json.Marshal(f)
					kept[string(b)] = true
				}
				// The units a known end calls gone, and the DELETE markers
				// of them it counts as neutralised, are the unknown ones.
				wantUnknown := want[CodeUnitBeyondEnd] + want[CodeUnitAtRecoveryEnd] + ks.Neutralised - us.Neutralised
				gotUnknown := -1
				for _, f := range res.Findings {
					switch f.Code {
					case CodeTargetUnknown:
						if gotUnknown >= 0 {
							t.Errorf("two %s findings", f.Code)
						}
						gotUnknown = f.Details["units"].(int)
						if w, _ := f.Details["waits_on"].([]string); len(w) != 1 || w[0] != waits {
							t.Errorf("%s waits on %v", f.Code, f.Details["waits_on"])
						}
						continue
					case CodeRecoveryPlan:
						if f.Details["unknown"] != true {
							t.Errorf("the recovery plan is not unknown: %s", f.Message)
						}
						continue
					}
					if decided[f.Code] {
						t.Errorf("%s at %s@%d with the end unknown: %s", f.Code, f.Path, f.Offset, f.Message)
						continue
					}
					b, _ := json.Marshal(f)
					if !kept[string(b)] {
						t.Errorf("a finding the known end does not give: %s", b)
					}
					delete(kept, string(b))
				}
				for b := range kept {
					t.Errorf("a finding of the known end missing: %s", b)
				}
				switch {
				case wantUnknown == 0 && gotUnknown >= 0:
					t.Errorf("%d units unknown, none past the end", gotUnknown)
				case wantUnknown > 0 && gotUnknown != wantUnknown:
					t.Errorf("%d units unknown, want %d (beyond %d, at end %d)", gotUnknown, wantUnknown, want[CodeUnitBeyondEnd], want[CodeUnitAtRecoveryEnd])
				}
				if !us.Recovery.Unknown {
					t.Error("the prediction is not unknown")
				}
				for _, o := range us.Recovery.Messages {
					if o.Outcome != OutcomeLost { // only the 7-day TTL's
						t.Errorf("outcome %s for %s with the end unknown", o.Outcome, o.UniqKey)
					}
				}
			})
		}
	}
}

// TestRecoveryEndUnknownWhy: when the end is a lower bound for want of an
// assumption (which recovery runs), not a file not read, the timer's
// findings say so, not that something "could not be read".
func TestRecoveryEndUnknownWhy(t *testing.T) {
	const why = "which recovery runs is not known: the store version (4.x or 5.x)"
	res, err := Scan(t.Context(), Config{Root: fixture(t, "t1-clean"), RecoveryEnd: 0, RecoveryEndUnknown: "store version (4.x or 5.x)",
		RecoveryEndWhy: why, Now: time.UnixMilli(1796163834084)}, scan.Options{})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, f := range res.Findings {
		if f.Code != CodeTargetUnknown && f.Code != CodeRecoveryPlan {
			continue
		}
		seen[f.Code] = true
		if !strings.Contains(f.Message, why) || strings.Contains(f.Message, "could not be read") || strings.Contains(f.Message, "the read of") {
			t.Errorf("%s: %s", f.Code, f.Message)
		}
	}
	if !seen[CodeTargetUnknown] || !seen[CodeRecoveryPlan] {
		t.Errorf("findings seen: %v", seen)
	}
}
