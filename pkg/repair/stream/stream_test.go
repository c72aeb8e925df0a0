package stream_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/storectl/storectl/internal/streamtest"
	"github.com/storectl/storectl/internal/testutil"
	"github.com/storectl/storectl/pkg/format/osiris"
	"github.com/storectl/storectl/pkg/repair"
	streamrepair "github.com/storectl/storectl/pkg/repair/stream"
	"github.com/storectl/storectl/pkg/scan"
	sscan "github.com/storectl/storectl/pkg/scan/stream"
)

func TestMain(m *testing.M) { os.Exit(streamtest.Main(m)) }

func cfgFor(node string) streamrepair.Config {
	return streamrepair.Config{Scan: sscan.Config{Root: node, StreamRoots: []string{filepath.Join(node, "stream")}}, ToolVersion: "test"}
}

func scanClean(t *testing.T, node string) *sscan.Result {
	t.Helper()
	res, err := sscan.ScanStreams(context.Background(), cfgFor(node).Scan, scan.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range res.Findings {
		t.Errorf("after repair: %s %s@%d: %s", f.Code, f.Path, f.Offset, f.Message)
	}
	return res
}

// applyUndo applies p, then undoes it, checking the tree after each step:
// after the apply it is `after`, after the undo the tree before the apply.
func applyUndo(t *testing.T, node string, p *repair.Plan, check func()) {
	t.Helper()
	before := testutil.TreeHash(t, node)
	bk := filepath.Join(t.TempDir(), "backup")
	if _, err := repair.Apply(context.Background(), p, repair.ApplyOptions{BackupDir: bk}); err != nil {
		t.Fatal(err)
	}
	check()
	if _, err := repair.Undo(context.Background(), bk, repair.UndoOptions{Apply: true}); err != nil {
		t.Fatal(err)
	}
	testutil.SameTree(t, before, testutil.TreeHash(t, node))
}

// TestRebuildIndexByteIdentical: every index of every stream of S1, S2,
// S3, Q3 (4.0.5) and T1 (3.10.8) removed, rebuilt from the segments: byte
// for byte the broker's files. The dry run changes nothing, undo puts the damaged
// state back byte for byte. Before the rebuild the broker's 4.0.5 start
// would have deleted every segment (no index: all are orphans).
func TestRebuildIndexByteIdentical(t *testing.T) {
	total := 0
	for _, ds := range streamtest.All {
		node := streamtest.Copy(t, ds)
		orig := map[string][]byte{}
		idxs, _ := filepath.Glob(filepath.Join(node, "stream", "*", "*.index"))
		for _, p := range idxs {
			orig[p] = mustRead(t, p)
			if err := os.Remove(p); err != nil {
				t.Fatal(err)
			}
		}
		res, err := sscan.ScanStreams(context.Background(), cfgFor(node).Scan, scan.Options{})
		if err != nil {
			t.Fatal(err)
		}
		for _, st := range res.Streams {
			if q := st.Queue; q.Drop != q.Entries || q.Entries == 0 {
				t.Errorf("%s %s: without indexes the next start drops %d of %d", ds.Name, q.Queue, q.Drop, q.Entries)
			}
		}
		damaged := testutil.TreeHash(t, node)
		p, rep, err := streamrepair.PlanRebuildIndex(context.Background(), cfgFor(node), nil)
		if err != nil {
			t.Fatal(err)
		}
		testutil.SameTree(t, damaged, testutil.TreeHash(t, node)) // planning writes nothing
		if len(p.Actions) != len(idxs) || rep.Scanned() == nil {
			t.Fatalf("%s: %d actions for %d indexes", ds.Name, len(p.Actions), len(idxs))
		}
		applyUndo(t, node, p, func() {
			for path, b := range orig {
				if got := mustRead(t, path); !bytes.Equal(got, b) {
					t.Errorf("%s: rebuilt %s differs from the broker's (%d vs %d bytes)", ds.Name, path, len(got), len(b))
				}
				total++
			}
			scanClean(t, node)
		})
	}
	t.Logf("%d indexes rebuilt byte-identical to the broker's", total)
}

func mustRead(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestRebuildDamagedIndex: a shortened last index (whole chunks the
// broker's start would cut away) and a middle index with a wrong record
// and zero padding are rebuilt as the broker wrote them.
func TestRebuildDamagedIndex(t *testing.T) {
	node := streamtest.Copy(t, streamtest.Datasets40[0])
	dir, _ := filepath.Glob(filepath.Join(node, "stream", "__s1a_*"))
	last := filepath.Join(dir[0], "00000000000000001171.index")
	mid := filepath.Join(dir[0], "00000000000000000403.index")
	origLast, origMid := mustRead(t, last), mustRead(t, mid)
	os.WriteFile(last, origLast[:len(origLast)-2*osiris.IndexRecordSize], 0o644)
	bad := append([]byte(nil), origMid...)
	bad[osiris.FileHeaderSize+3*osiris.IndexRecordSize+7] ^= 0x10 // a chunk id
	bad = append(bad, make([]byte, 2*osiris.IndexRecordSize)...)
	os.WriteFile(mid, bad, 0o644)
	before, err := sscan.ScanStreams(context.Background(), cfgFor(node).Scan, scan.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var drop int
	for _, st := range before.Streams {
		drop += st.Queue.Drop
	}
	if drop == 0 {
		t.Fatal("the shortened last index should cost messages at the next start")
	}
	p, _, err := streamrepair.PlanRebuildIndex(context.Background(), cfgFor(node), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Actions) != 2 {
		t.Fatalf("%d actions", len(p.Actions))
	}
	applyUndo(t, node, p, func() {
		if !bytes.Equal(mustRead(t, last), origLast) || !bytes.Equal(mustRead(t, mid), origMid) {
			t.Error("rebuilt indexes differ from the broker's")
		}
		res := scanClean(t, node)
		for _, st := range res.Streams {
			if st.Queue.Drop != 0 {
				t.Errorf("%s: drop %d after the rebuild", st.Queue.Queue, st.Queue.Drop)
			}
		}
	})
}

// cutLast cuts s1c's last segment in the middle of its last chunk's data.
func cutLast(t *testing.T) (node, seg string, last osiris.Chunk, lostRecords int) {
	node = streamtest.Copy(t, streamtest.Datasets40[0])
	dir, _ := filepath.Glob(filepath.Join(node, "stream", "__s1a_*"))
	seg = filepath.Join(dir[0], "00000000000000001171.segment")
	b := mustRead(t, seg)
	sr, _ := osiris.NewSegmentReader(bytes.NewReader(b), int64(len(b)))
	for sr.Next() {
		if c := sr.Chunk(); c.Header.NumEntries > 1 {
			last = *c
		} else {
			last = osiris.Chunk{}
		}
	}
	if last.Header.NumEntries < 2 {
		t.Skip("the last chunk has one entry")
	}
	// cut after the first entry and a bit
	it := osiris.Entries(last.Data, last.Pos+last.Header.DataOffset())
	it.Next()
	cut := it.Entry().Pos + it.Entry().Size() + 3
	if err := os.Truncate(seg, cut); err != nil {
		t.Fatal(err)
	}
	return node, seg, last, int(last.Header.NumRecords)
}

// TestTruncateTorn: a torn last chunk is cut where osiris' start cuts it
// (the plan equals the predicted recovery), and afterwards the start has
// nothing to do; with KeepWholeEntries the chunk is rewritten with its
// whole entry instead, valid, indexed and readable.
func TestTruncateTorn(t *testing.T) {
	t.Run("osiris", func(t *testing.T) {
		node, seg, last, lost := cutLast(t)
		before, _ := sscan.ScanStreams(context.Background(), cfgFor(node).Scan, scan.Options{})
		var want sscan.Recovery
		for _, st := range before.Streams {
			if st.Queue.Queue == "s1a" {
				want = st.Recovery
			}
		}
		p, rep, err := streamrepair.PlanTruncate(context.Background(), cfgFor(node), nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Actions) != len(want.Truncated) {
			t.Fatalf("%d actions, the broker's start makes %d cuts", len(p.Actions), len(want.Truncated))
		}
		cuts := map[string]int64{}
		for _, c := range want.Truncated {
			cuts[c.Path] = c.To
		}
		for _, a := range p.Actions {
			if to, ok := cuts[a.Path]; a.Op != repair.OpTruncateFile || !ok || a.NewSize != to {
				t.Errorf("action %s %s to %d, the broker cuts %v", a.Op, a.Path, a.NewSize, want.Truncated)
			}
		}
		if c := rep.Streams[0].Cuts[0]; c.How != "osiris" || c.To != last.Pos || c.Messages != int64(lost) {
			t.Errorf("cut %+v", c)
		}
		applyUndo(t, node, p, func() {
			res := scanClean(t, node)
			for _, st := range res.Streams {
				if st.Recovery.Changes() {
					t.Errorf("after truncate the start still changes %+v", st.Recovery)
				}
			}
			if fi, _ := os.Stat(seg); fi.Size() != last.Pos {
				t.Errorf("segment %d bytes, want %d", fi.Size(), last.Pos)
			}
		})
	})
	t.Run("whole-entries", func(t *testing.T) {
		node, seg, last, _ := cutLast(t)
		cfg := cfgFor(node)
		cfg.KeepWholeEntries = true
		p, rep, err := streamrepair.PlanTruncate(context.Background(), cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		c := rep.Streams[0].Cuts[0]
		if c.How != "whole-entries" || c.Kept != 1 {
			t.Fatalf("cut %+v, notes %v", c, rep.Streams[0].Notes)
		}
		applyUndo(t, node, p, func() {
			res := scanClean(t, node)
			var n int
			_, err := sscan.ScanStreams(context.Background(), sscan.Config{Root: node, StreamDirs: []string{filepath.Dir(seg)},
				OnMessage: func(m *sscan.Message) error {
					if m.ChunkPos == last.Pos {
						n++
						if !m.CRCMatch || m.Offset != last.Header.ChunkID {
							t.Errorf("rewritten entry: crc %v offset %d", m.CRCMatch, m.Offset)
						}
					}
					return nil
				}}, scan.Options{})
			if err != nil || n != 1 {
				t.Errorf("%d messages in the rewritten chunk (%v)", n, err)
			}
			for _, st := range res.Streams {
				if st.Recovery.Changes() {
					t.Errorf("after truncate the start still changes %+v", st.Recovery)
				}
			}
		})
	})
}

func TestTruncateNothing(t *testing.T) {
	node := streamtest.NodeDir(t, streamtest.Datasets40[1])
	p, rep, err := streamrepair.PlanTruncate(context.Background(), cfgFor(node), nil)
	if err != nil || len(p.Actions) != 0 || len(rep.Streams) != 0 {
		t.Fatalf("%v %d actions %+v", err, len(p.Actions), rep.Streams)
	}
	p, _, err = streamrepair.PlanRebuildIndex(context.Background(), cfgFor(node), nil)
	if err != nil || len(p.Actions) != 0 {
		t.Fatalf("%v %d actions", err, len(p.Actions))
	}
	_ = strings.TrimSpace
}
