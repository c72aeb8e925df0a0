package salvage

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// BenchmarkSalvageAll: --select all of crash-mid-write-confirmed (2,261
// messages, 43.6 MB of bodies) into a new out dir, syncs batched. It
// reports s/export (the target: well under 1 s), the syncs per export and
// x-create-floor: the export's time over the time of writing the same
// 2,261 body files with os.WriteFile and no sync at all, measured after
// each export on the same host (a shared machine's file creation varies
// several-fold with its load, the ratio less). The time is dominated by
// creating the files (openat with O_CREAT, in CPU profiles), not by the
// syncs; BenchmarkCreateFiles is the floor alone.
func BenchmarkSalvageAll(b *testing.B) {
	root, vdir := crashConfirmed(b)
	o := Options{Select: []Selection{SelectAll}}
	var st Stats
	var floor time.Duration
	for i := 0; b.Loop(); i++ {
		out := filepath.Join(b.TempDir(), fmt.Sprint(i))
		_, st = export(b, root, vdir, out, o, Spec{Select: o.Select}, nil)
		b.StopTimer()
		bodies := exportedBodies(b, out)
		start := time.Now()
		writeBodies(b, filepath.Join(b.TempDir(), fmt.Sprint("floor", i)), bodies)
		floor += time.Since(start)
		b.StartTimer()
	}
	per := b.Elapsed().Seconds() / float64(b.N)
	b.SetBytes(st.Bytes)
	b.ReportMetric(float64(st.Written), "msgs/op")
	b.ReportMetric(float64(st.Syncs), "syncs/op")
	b.ReportMetric(per, "s/export")
	b.ReportMetric(b.Elapsed().Seconds()/floor.Seconds(), "x-create-floor")
}

// exportedBodies reads back the bodies of an export, in manifest order.
func exportedBodies(b *testing.B, out string) [][]byte {
	msgs, err := ReadMessages(out)
	if err != nil {
		b.Fatal(err)
	}
	bodies := make([][]byte, len(msgs))
	for i := range msgs {
		bodies[i], _ = ReadBody(out, &msgs[i])
	}
	return bodies
}

// writeBodies writes each body to its own new file in dir, no sync.
func writeBodies(b *testing.B, dir string, bodies [][]byte) {
	os.MkdirAll(dir, 0o755)
	for j, body := range bodies {
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("%06d.bin", j)), body, 0o644); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCreateFiles is the floor of BenchmarkSalvageAll: the same
// 2,261 body files written with os.WriteFile, no manifest, no sync.
func BenchmarkCreateFiles(b *testing.B) {
	root, vdir := crashConfirmed(b)
	out := filepath.Join(b.TempDir(), "ref")
	export(b, root, vdir, out, Options{Select: []Selection{SelectAll}}, Spec{Select: []Selection{SelectAll}}, nil)
	bodies := exportedBodies(b, out)
	var n int64
	for _, body := range bodies {
		n += int64(len(body))
	}
	b.SetBytes(n)
	for i := 0; b.Loop(); i++ {
		writeBodies(b, filepath.Join(b.TempDir(), fmt.Sprint(i)), bodies)
	}
}
