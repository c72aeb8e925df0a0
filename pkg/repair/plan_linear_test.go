package repair

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"
)

// TestPlanBuildLinear: the work of Plan.Add does not grow with the plan
// (issue 21, defect 8: each Add revalidated the whole plan, so building
// 10,000 actions took 48 s and 100,000 never ended). The measure is the
// heap allocations per action, counted, not timed: building 3,000
// actions may cost at most 1.5x per action what 300 cost (the old code:
// about 10x). BenchmarkPlanBuild times 1,000 to 100,000.
func TestPlanBuildLinear(t *testing.T) {
	perAction := func(n int) float64 {
		data := t.TempDir()
		if d, err := os.MkdirTemp("/dev/shm", "storectl-plan-"); err == nil { // file creation on a loaded disk is the slow part
			t.Cleanup(func() { os.RemoveAll(d) })
			data = d
		}
		dir := filepath.Join(data, "consumequeue", "TopicA", "0")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < n; i++ {
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("%020d", i*6000)), nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		acts := make([]Action, n)
		for i := range acts {
			acts[i] = Action{Op: OpRemoveFile, Path: filepath.Join("consumequeue", "TopicA", "0", fmt.Sprintf("%020d", i*6000)), Reason: "test"}
		}
		p, err := NewPlan(data, "test", time.Now())
		if err != nil {
			t.Fatal(err)
		}
		var m0, m1 runtime.MemStats
		runtime.ReadMemStats(&m0)
		for _, a := range acts {
			if err := p.Add(a, SnapshotOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		runtime.ReadMemStats(&m1)
		if err := p.Validate(); err != nil {
			t.Fatal(err)
		}
		return float64(m1.Mallocs-m0.Mallocs) / float64(n)
	}
	small, large := perAction(300), perAction(3000)
	t.Logf("allocations per Plan.Add: %.1f at 300 actions, %.1f at 3,000", small, large)
	if large > 1.5*small {
		t.Fatalf("Plan.Add allocates %.1f times more per action at 3,000 actions than at 300: building a plan is not linear", large/small)
	}
}
