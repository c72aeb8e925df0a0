package stream

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	genstream "github.com/storectl/storectl/internal/gen/stream"
	"github.com/storectl/storectl/pkg/format/osiris"
	"github.com/storectl/storectl/pkg/scan"
)

// splitStore generates a stream of several segments of small chunks.
func splitStore(t *testing.T) (node string, segs []string) {
	t.Helper()
	sum, err := genstream.Generate(t.TempDir(), genstream.Config{Seed: 7, TotalBytes: 9 << 20, MaxSegmentSize: 7 << 19, BodyMin: 20, BodyMax: 300})
	if err != nil {
		t.Fatal(err)
	}
	segs, _ = filepath.Glob(filepath.Join(sum.Node, "stream", "*", "*.segment"))
	if len(segs) < 3 {
		t.Fatalf("%d segments, want at least 3", len(segs))
	}
	return sum.Node, segs
}

// chunksOf lists the chunks of a segment's bytes.
func chunksOf(t *testing.T, b []byte) []osiris.Chunk {
	t.Helper()
	var out []osiris.Chunk
	for p := int64(osiris.FileHeaderSize); p < int64(len(b)); {
		c, err := osiris.DecodeChunk(b[p:], p)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, c)
		p = c.End()
	}
	return out
}

// scanJSON scans node with jobs and returns the result, the streams'
// recovery and queue lines as JSON.
func scanJSON(t *testing.T, node string, jobs int) string {
	t.Helper()
	res, err := ScanStreams(context.Background(), Config{Root: node, StreamRoots: []string{filepath.Join(node, "stream")}}, scan.Options{Jobs: jobs})
	if err != nil {
		t.Fatal(err)
	}
	var sts []any
	for _, st := range res.Streams {
		sts = append(sts, []any{st.Recovery, st.ByVersion, st.Queue})
	}
	b, err := json.MarshalIndent([]any{res.Result, sts}, "", " ")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestSplitSameAsWalk: a segment whose chunk checks run on helpers, in
// batches cut at every size from one chunk up (so a damaged chunk, a bad
// message and a damaged header fall at a batch's start, middle and end),
// gives the findings, counts and bytes of the walk that checks each chunk
// as it reads it (one job): CRC failures past the per-code limit, a
// damaged chunk header with its resync, an entry that is not an AMQP
// message, a torn tail.
func TestSplitSameAsWalk(t *testing.T) {
	node, segs := splitStore(t)
	// Segment 0: every other chunk's data fails its CRC (over 200).
	b, err := os.ReadFile(segs[0])
	if err != nil {
		t.Fatal(err)
	}
	cs := chunksOf(t, b)
	if len(cs) < 2*maxFindingsPerCode+10 {
		t.Fatalf("%d chunks in segment 0, want more than %d", len(cs), 2*maxFindingsPerCode+10)
	}
	for i := 1; i < len(cs); i += 2 {
		b[cs[i].Pos+cs[i].Header.DataOffset()+int64(cs[i].Header.DataSize)/2] ^= 0x5a
	}
	writeTestFile(t, segs[0], b)
	// Segment 1: chunk 3's first user entry is not an AMQP message (its
	// CRC still matches), chunk 9's header is damaged.
	b, err = os.ReadFile(segs[1])
	if err != nil {
		t.Fatal(err)
	}
	cs = chunksOf(t, b)
	bad := -1
	for i := 3; i < len(cs); i++ {
		if cs[i].Header.Type != osiris.ChunkUser {
			continue
		}
		it := osiris.Entries(cs[i].Data, cs[i].Pos+cs[i].Header.DataOffset())
		if it.Next() && !it.Entry().SubBatch {
			e := it.Entry()
			b[e.Pos+int64(e.HeaderSize())] = 0xff // not a described section
			data := b[cs[i].Pos+cs[i].Header.DataOffset():][:cs[i].Header.DataSize]
			binary.BigEndian.PutUint32(b[cs[i].Pos+32:], osiris.CRC(data))
			bad = i
			break
		}
	}
	if bad < 0 || bad+6 >= len(cs) {
		t.Fatal("no user chunk to damage")
	}
	b[cs[bad+6].Pos] = 0
	writeTestFile(t, segs[1], b)
	// The last segment: cut in its last chunk.
	last := segs[len(segs)-1]
	b, err = os.ReadFile(last)
	if err != nil {
		t.Fatal(err)
	}
	cs = chunksOf(t, b)
	writeTestFile(t, last, b[:cs[len(cs)-1].Pos+60])

	want := scanJSON(t, node, 1)
	for _, code := range []string{CodeChunkCRC, CodeTooManyFindings, CodeBadMessage, CodeBadChunk, CodeTornTail} {
		if !strings.Contains(want, fmt.Sprintf("%q", code)) {
			t.Errorf("the damage gives no %s finding", code)
		}
	}
	// Unmapped (pread into one reused buffer): no helpers, the same.
	mapSegments = false
	before := helperBatches.Load()
	got := scanJSON(t, node, 3)
	mapSegments = true
	if got != want {
		t.Errorf("unmapped, 3 jobs: the result differs from the one-job walk")
		diffLines(t, want, got)
	}
	if helperBatches.Load() != before {
		t.Errorf("unmapped: %d batches checked on helpers, want none", helperBatches.Load()-before)
	}
	defer func(n, c int) { splitBatchBytes, splitBatchChunks = n, c }(splitBatchBytes, splitBatchChunks)
	for _, bc := range [][2]int{{1 << 30, 1}, {1 << 30, 2}, {1 << 30, 5}, {4 << 10, 64}, {512 << 10, 64}} {
		splitBatchBytes, splitBatchChunks = bc[0], bc[1]
		before := helperBatches.Load()
		for _, jobs := range []int{2, 3} {
			if got := scanJSON(t, node, jobs); got != want {
				t.Errorf("batches of %d bytes / %d chunks, %d jobs: the result differs from the one-job walk", bc[0], bc[1], jobs)
				diffLines(t, want, got)
			}
		}
		if helperBatches.Load() == before {
			t.Errorf("batches of %d bytes / %d chunks: no batch was checked on a helper", bc[0], bc[1])
		}
	}
}

func diffLines(t *testing.T, want, got string) {
	t.Helper()
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	for i := 0; i < max(len(w), len(g)); i++ {
		var a, b string
		if i < len(w) {
			a = w[i]
		}
		if i < len(g) {
			b = g[i]
		}
		if a != b {
			t.Logf("line %d:\n want %s\n got  %s", i+1, a, b)
			return
		}
	}
}

func writeTestFile(t *testing.T, p string, b []byte) {
	t.Helper()
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestSplitShrinkingSegment: a segment cut short while it is scanned
// through its mapping ends the segment's scan with an error naming the
// segment and the offset of the fault (past the new end), with helpers
// and without, instead of killing the process.
func TestSplitShrinkingSegment(t *testing.T) {
	for _, jobs := range []int{1, 3} {
		node, segs := splitStore(t)
		const cut = 64 << 10
		var once bool // one segment: one goroutine reads
		progress := func(int64) {
			if !once {
				once = true // after the segment header, before any chunk
				if err := os.Truncate(segs[0], cut); err != nil {
					t.Error(err)
				}
			}
		}
		res, err := ScanStreams(context.Background(), Config{Root: node, Files: []string{segs[0]}},
			scan.Options{Jobs: jobs, Progress: progress})
		if err != nil {
			t.Fatal(err)
		}
		var msg string
		for _, e := range res.Errors {
			if strings.Contains(e, filepath.Base(segs[0])) {
				msg = e
			}
		}
		var off int64
		if _, err := fmt.Sscanf(msg[strings.Index(msg, "offset "):], "offset %d:", &off); err != nil || !strings.Contains(msg, "memory fault") || off < cut {
			t.Fatalf("jobs %d: errors %q, want a memory fault in %s at an offset from %d on", jobs, res.Errors, filepath.Base(segs[0]), cut)
		}
		t.Logf("jobs %d: %s", jobs, msg)
	}
}
