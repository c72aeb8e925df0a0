package repair

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// BenchmarkPlanBuild builds a plan of n remove-file actions over n empty
// offset-named files (issue 21, defect 8: Plan.Add revalidated the whole
// plan on every call, 1,000 / 3,000 / 10,000 actions took 0.48 / 4.4 / 48 s
// and 100,000 never finished). ns/action must stay flat as n grows 100x;
// the files are made once per size, outside the timer.
func BenchmarkPlanBuild(b *testing.B) {
	for _, n := range []int{1000, 10000, 100000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			data := b.TempDir()
			if d, err := os.MkdirTemp("/dev/shm", "storectl-plan-"); err == nil { // 100,000 file creations on a loaded disk take minutes
				b.Cleanup(func() { os.RemoveAll(d) })
				data = d
			}
			dir := filepath.Join(data, "consumequeue", "TopicA", "0")
			if err := os.MkdirAll(dir, 0o755); err != nil {
				b.Fatal(err)
			}
			for i := 0; i < n; i++ {
				if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("%020d", i*6000)), nil, 0o644); err != nil {
					b.Fatal(err)
				}
			}
			b.ResetTimer()
			for b.Loop() {
				p, err := NewPlan(data, "bench", time.Now())
				if err != nil {
					b.Fatal(err)
				}
				for i := 0; i < n; i++ {
					a := Action{Op: OpRemoveFile, Path: filepath.Join("consumequeue", "TopicA", "0", fmt.Sprintf("%020d", i*6000)), Reason: "bench"}
					if err := p.Add(a, SnapshotOptions{}); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/action")
		})
	}
}
