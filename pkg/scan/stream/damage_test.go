package stream_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/storectl/storectl/internal/streamtest"
	"github.com/storectl/storectl/pkg/format/osiris"
	"github.com/storectl/storectl/pkg/scan"
	"github.com/storectl/storectl/pkg/scan/stream"
)

// chunkList returns the chunks (headers and positions) of a segment.
func chunkList(t *testing.T, path string) []osiris.Chunk {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	sr, err := osiris.NewSegmentReader(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	var out []osiris.Chunk
	for sr.Next() {
		c := *sr.Chunk()
		c.Data, c.Trailer, c.Filter = nil, nil, nil
		out = append(out, c)
	}
	return out
}

// s1aCopy copies S1 and returns its node dir and s1a's stream dir.
func s1aCopy(t *testing.T) (node, dir string) {
	node = streamtest.Copy(t, streamtest.Datasets40[0])
	m, _ := filepath.Glob(filepath.Join(node, "stream", "__s1a_*"))
	if len(m) != 1 {
		t.Fatal("no s1a")
	}
	return node, m[0]
}

func seg(dir, name string) string { return filepath.Join(dir, name+".segment") }
func idx(dir, name string) string { return filepath.Join(dir, name+".index") }

func findings(res *stream.Result, code string) []scan.Finding {
	var out []scan.Finding
	for _, f := range res.Findings {
		if f.Code == code {
			out = append(out, f)
		}
	}
	return out
}

func only(t *testing.T, res *stream.Result, code, path string, offset int64) scan.Finding {
	t.Helper()
	fs := findings(res, code)
	if len(fs) != 1 {
		for _, f := range res.Findings {
			t.Logf("%s %s@%d: %s", f.Code, f.Path, f.Offset, f.Message)
		}
		t.Fatalf("%d %s findings, want 1", len(fs), code)
	}
	f := fs[0]
	if f.Path != path || f.Offset != offset {
		t.Fatalf("%s at %s@%d, want %s@%d", code, f.Path, f.Offset, path, offset)
	}
	return f
}

func s1aQueue(t *testing.T, res *stream.Result) stream.Queue {
	for _, st := range res.Streams {
		if st.Queue.Queue == "s1a" {
			return st.Queue
		}
	}
	t.Fatal("no s1a queue")
	return stream.Queue{}
}

func rel(node, p string) string { r, _ := filepath.Rel(node, p); return filepath.ToSlash(r) }

func writeFile(t *testing.T, p string, b []byte) {
	t.Helper()
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func readFile(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestDamageFlippedByte: one flipped byte inside a chunk's data is found
// at the chunk, with the broker's consequence per version.
func TestDamageFlippedByte(t *testing.T) {
	node, dir := s1aCopy(t)
	p := seg(dir, "00000000000000000293")
	cs := chunkList(t, p)
	var c osiris.Chunk
	for _, x := range cs {
		if x.Header.Type == osiris.ChunkUser && x.Header.NumEntries > 1 {
			c = x
			break
		}
	}
	if c.Header.NumEntries == 0 {
		t.Fatal("no chunk of several entries")
	}
	b := readFile(t, p)
	b[c.Pos+c.Header.DataOffset()+10] ^= 0x01
	writeFile(t, p, b)
	res := scanNode(t, node, "4.0.5", nil)
	f := only(t, res, stream.CodeChunkCRC, rel(node, p), c.Pos)
	if f.Severity != scan.Error || f.Length != c.Header.Size() || !strings.Contains(f.Message, "delivered as they are") {
		t.Errorf("4.0.5: %+v", f)
	}
	if q := s1aQueue(t, res); q.CRCDamaged != int64(c.Header.NumRecords) || q.Drop != 0 {
		t.Errorf("queue: crc damaged %d drop %d", q.CRCDamaged, q.Drop)
	}
	res = scanNode(t, node, "3.10.8", nil)
	f = only(t, res, stream.CodeChunkCRC, rel(node, p), c.Pos)
	if !strings.Contains(f.Message, "crc_validation_failure") {
		t.Errorf("3.10.8: %s", f.Message)
	}
	if len(res.Findings) != 1 {
		t.Errorf("%d findings, want only the CRC one", len(res.Findings))
	}
}

// TestDamageCutSegment: the last segment cut mid-chunk and mid-header.
func TestDamageCutSegment(t *testing.T) {
	for _, where := range []string{"mid-chunk", "mid-header"} {
		t.Run(where, func(t *testing.T) {
			node, dir := s1aCopy(t)
			p := seg(dir, "00000000000000001171")
			cs := chunkList(t, p)
			last := cs[len(cs)-1]
			cut := last.Pos + 20
			if where == "mid-chunk" {
				cut = last.Pos + last.Header.DataOffset() + int64(last.Header.DataSize)/2
			}
			if err := os.Truncate(p, cut); err != nil {
				t.Fatal(err)
			}
			res := scanNode(t, node, "4.0.5", nil)
			f := only(t, res, stream.CodeTornTail, rel(node, p), last.Pos)
			if f.Length != cut-last.Pos || f.Repair != scan.RepairTruncate || !strings.Contains(f.Message, "next start cuts the segment") {
				t.Errorf("%+v", f)
			}
			q := s1aQueue(t, res)
			ns := q.NextStart
			if where == "mid-chunk" {
				if f.Details["whole_entries"] == nil || f.Details["chunk_id"] != last.Header.ChunkID {
					t.Errorf("details %v", f.Details)
				}
				// the index has the torn chunk's record: recovery drops it
				// and cuts both files
				if ns.DropMessages != int64(last.Header.NumRecords) || ns.DropChunks != 1 || len(ns.Truncated) != 2 {
					t.Errorf("next start %+v", ns)
				}
				if q.Drop != int(last.Header.NumRecords) || q.Keep != q.Entries-q.Drop {
					t.Errorf("keep %d drop %d entries %d", q.Keep, q.Drop, q.Entries)
				}
			} else if ns.DropChunks != 0 || len(ns.Truncated) == 0 {
				// a cut header has no records: nothing more is lost, but the
				// index record and the bytes go
				t.Errorf("next start %+v", ns)
			}
			if *ns.Next != last.Header.ChunkID {
				t.Errorf("next offset %d, want %d", *ns.Next, last.Header.ChunkID)
			}
			if len(findings(res, stream.CodeRecovery)) != 1 {
				t.Errorf("no recovery finding")
			}
		})
	}
}

// TestDamageDeletedIndex: a middle segment without its index, and a
// shortened index (middle and last).
func TestDamageDeletedIndex(t *testing.T) {
	node, dir := s1aCopy(t)
	name := "00000000000000000589"
	if err := os.Remove(idx(dir, name)); err != nil {
		t.Fatal(err)
	}
	res := scanNode(t, node, "4.0.5", nil)
	f := only(t, res, stream.CodeIndexMissing, rel(node, seg(dir, name)), 0)
	if f.Repair != scan.RepairRebuildIndex || !strings.Contains(f.Message, "sent to the end of the stream") {
		t.Errorf("%+v", f)
	}
	q := s1aQueue(t, res)
	if len(q.Unattachable) != 1 || q.Unattachable[0] != (stream.Range{From: 589, To: 676}) || q.Drop != 0 {
		t.Errorf("unattachable %v drop %d", q.Unattachable, q.Drop)
	}
}

func TestDamageShortIndex(t *testing.T) {
	t.Run("middle", func(t *testing.T) {
		node, dir := s1aCopy(t)
		name := "00000000000000000676"
		p := idx(dir, name)
		b := readFile(t, p)
		writeFile(t, p, b[:len(b)-3*osiris.IndexRecordSize])
		cs := chunkList(t, seg(dir, name))
		res := scanNode(t, node, "4.0.5", nil)
		f := only(t, res, stream.CodeIndexShort, rel(node, p), int64(len(b)-3*osiris.IndexRecordSize))
		lost := cs[len(cs)-3]
		rg := f.Details["offsets"].(stream.Range)
		if rg.From != lost.Header.ChunkID || rg.To != 777 || f.Details["chunk_pos"] != lost.Pos {
			t.Errorf("%+v", f.Details)
		}
		q := s1aQueue(t, res)
		if len(q.Unattachable) != 1 || q.Unattachable[0] != rg || q.Drop != 0 {
			t.Errorf("unattachable %v drop %d", q.Unattachable, q.Drop)
		}
	})
	t.Run("last", func(t *testing.T) {
		node, dir := s1aCopy(t)
		name := "00000000000000001171"
		p := idx(dir, name)
		b := readFile(t, p)
		writeFile(t, p, b[:len(b)-2*osiris.IndexRecordSize])
		cs := chunkList(t, seg(dir, name))
		res := scanNode(t, node, "4.0.5", nil)
		only(t, res, stream.CodeIndexShort, rel(node, p), int64(len(b)-2*osiris.IndexRecordSize))
		q := s1aQueue(t, res)
		want := int(cs[len(cs)-1].Header.NumRecords + cs[len(cs)-2].Header.NumRecords)
		if q.Drop != want || q.NextStart.DropChunks != 2 {
			t.Errorf("drop %d (%+v), want %d", q.Drop, q.NextStart, want)
		}
		rf := only(t, res, stream.CodeRecovery, rel(node, dir), 0)
		if rf.Repair != scan.RepairRebuildIndex || !strings.Contains(rf.Message, "rebuild-index keeps them") {
			t.Errorf("%+v", rf)
		}
	})
}

// TestDamageOrphans: a segment before the first pair (the retention race:
// deleted by 4.0, kept by 3.10), and an index without its segment.
func TestDamageOrphans(t *testing.T) {
	node, dir := s1aCopy(t)
	if err := os.Remove(idx(dir, "00000000000000000000")); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(seg(dir, "00000000000000001171")); err != nil {
		t.Fatal(err)
	}
	res := scanNode(t, node, "4.0.5", nil)
	only(t, res, stream.CodeIndexMissing, rel(node, seg(dir, "00000000000000000000")), 0)
	only(t, res, stream.CodeOrphanIndex, rel(node, idx(dir, "00000000000000001171")), 0)
	q := s1aQueue(t, res)
	if len(q.NextStart.Deleted) != 2 || q.NextStart.DropMessages != 97 {
		t.Errorf("4.0.5 next start %+v", q.NextStart)
	}
	res = scanNode(t, node, "3.10.8", nil)
	q = s1aQueue(t, res)
	if !strings.Contains(q.NextStart.Crash, "missing_file") {
		t.Errorf("3.10.8 next start %+v", q.NextStart)
	}
}

// TestDamageEpochRegression: a chunk (and its index record) with a higher
// epoch than the chunk after it.
func TestDamageEpochRegression(t *testing.T) {
	node, dir := s1aCopy(t)
	name := "00000000000000000403"
	cs := chunkList(t, seg(dir, name))
	k := 3
	sp, ip := seg(dir, name), idx(dir, name)
	b := readFile(t, sp)
	binary.BigEndian.PutUint64(b[cs[k].Pos+16:], 7)
	writeFile(t, sp, b)
	x := readFile(t, ip)
	binary.BigEndian.PutUint64(x[osiris.FileHeaderSize+k*osiris.IndexRecordSize+16:], 7)
	writeFile(t, ip, x)
	res := scanNode(t, node, "4.0.5", nil)
	f := only(t, res, stream.CodeEpochRegress, rel(node, sp), cs[k+1].Pos)
	if f.Expected != ">= 7" || f.Actual != "1" {
		t.Errorf("%+v", f)
	}
}

// TestDamageStrayFile: a stray file in a stream dir is noted; 4.0.0-4.0.3
// crash on it.
func TestDamageStrayFile(t *testing.T) {
	node, dir := s1aCopy(t)
	p := filepath.Join(dir, ".nfs000000001234")
	writeFile(t, p, []byte("x"))
	res := scanNode(t, node, "4.0.5", nil)
	f := only(t, res, stream.CodeStrayFile, rel(node, p), 0)
	if f.Severity != scan.Info {
		t.Errorf("4.0.5: %+v", f)
	}
	res = scanNode(t, node, "4.0.2", nil)
	f = only(t, res, stream.CodeStrayFile, rel(node, p), 0)
	if f.Severity != scan.Error || !strings.Contains(f.Message, "12704") {
		t.Errorf("4.0.2: %+v", f)
	}
}

// TestDamageGarbageHeader: a damaged chunk header in the middle of a
// segment; the scan resyncs on the index and reads the chunks after it.
func TestDamageGarbageHeader(t *testing.T) {
	node, dir := s1aCopy(t)
	name := "00000000000000000195"
	p := seg(dir, name)
	cs := chunkList(t, p)
	b := readFile(t, p)
	b[cs[5].Pos] = 0x00
	writeFile(t, p, b)
	var n int
	res, err := stream.ScanStreams(context.Background(), stream.Config{Root: node, StreamDirs: []string{dir}},
		scan.Options{Records: func(r any) error {
			if r.(stream.Record).Resynced {
				n++
			}
			return nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	f := only(t, res, stream.CodeBadChunk, rel(node, p), cs[5].Pos)
	if f.Details["resync_at"] != cs[6].Pos {
		t.Errorf("resync at %v, want %d", f.Details["resync_at"], cs[6].Pos)
	}
	want := 0
	for _, c := range cs[6:] {
		if c.Header.Type == osiris.ChunkUser {
			want += int(c.Header.NumRecords)
		}
	}
	if n != want {
		t.Errorf("%d messages read past the damage, want %d", n, want)
	}
}
