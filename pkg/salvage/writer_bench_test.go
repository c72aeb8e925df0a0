package salvage

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// BenchmarkSalvageAll: --select all of crash-mid-write-confirmed (2,261
// messages, 43.6 MB of bodies) into a new out dir, syncs batched. The
// time is dominated by creating 2,261 files on this file system:
// BenchmarkCreateFiles writes as many files of the same sizes, without any
// sync, for comparison.
func BenchmarkSalvageAll(b *testing.B) {
	root, vdir := crashConfirmed(b)
	o := Options{Select: []Selection{SelectAll}}
	var st Stats
	for i := 0; b.Loop(); i++ {
		_, st = export(b, root, vdir, filepath.Join(b.TempDir(), fmt.Sprint(i)), o, Spec{Select: o.Select}, nil)
	}
	b.SetBytes(st.Bytes)
	b.ReportMetric(float64(st.Written), "msgs/op")
	b.ReportMetric(float64(st.Syncs), "syncs/op")
}

// BenchmarkCreateFiles is the floor of BenchmarkSalvageAll: the same
// 2,261 body files written with os.WriteFile, no manifest, no sync.
func BenchmarkCreateFiles(b *testing.B) {
	root, vdir := crashConfirmed(b)
	out := filepath.Join(b.TempDir(), "ref")
	export(b, root, vdir, out, Options{Select: []Selection{SelectAll}}, Spec{Select: []Selection{SelectAll}}, nil)
	msgs, err := ReadMessages(out)
	if err != nil {
		b.Fatal(err)
	}
	bodies := make([][]byte, len(msgs))
	var n int64
	for i := range msgs {
		bodies[i], _ = ReadBody(out, &msgs[i])
		n += int64(len(bodies[i]))
	}
	b.SetBytes(n)
	for i := 0; b.Loop(); i++ {
		dir := filepath.Join(b.TempDir(), fmt.Sprint(i))
		os.MkdirAll(dir, 0o755)
		for j, body := range bodies {
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("%06d.bin", j)), body, 0o644); err != nil {
				b.Fatal(err)
			}
		}
	}
}
