package rabbitmq

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"testing"

	gen "github.com/storectl/storectl/internal/gen/rabbitmq"
	"github.com/storectl/storectl/internal/testutil"
	"github.com/storectl/storectl/pkg/scan"
)

// TestEachFileHandsWritten: on a generated store with holes, unreferenced
// records and a deleted file, ScanVHost's per-file callback is handed, file
// by file in order, every record the generator wrote with its status and
// queue (checkWritten), v.Files is not set before the transient store's
// files, and the files are released once handed over. (On the fixture
// datasets the records handed over are checked against the real broker's
// scanner: TestDatasetsMatchOracles, through scanKeep.)
func TestEachFileHandsWritten(t *testing.T) {
	root, dir, sum := genDeletedFileSum(t)
	var recs []RecordJSON
	last := int64(-1)
	v, err := ScanVHost(context.Background(), root, dir, VHostOptions{Options: scan.Options{Jobs: 2},
		EachFile: func(v *VHostScan, f *FileScan) error {
			if v.Files != nil && !f.Transient {
				t.Errorf("%s: v.Files is set during the persistent store's scan", f.Path)
			}
			if !f.Transient && f.Number <= last {
				t.Errorf("%s handed over after file %d", f.Path, last)
			}
			last = f.Number
			for _, r := range f.Records {
				recs = append(recs, RecordJSON{Path: r.Path, Offset: r.Offset, Size: r.TotalSize, MsgID: r.ID(),
					Status: r.Status, ReferencedBy: r.ReferencedBy})
			}
			return nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range v.Files {
		if f.Records != nil || f.Gaps != nil {
			t.Errorf("%s: records kept after they were handed over", f.Path)
		}
	}
	res := &scan.Result{}
	v.AddTo(res)
	t.Logf("%d written records checked", checkWritten(t, root, sum, map[int]bool{1: true}, res, recs))
}

// TestEachFileErrorStops: an error of the callback ends the scan with it,
// and no file after it is handed over.
func TestEachFileErrorStops(t *testing.T) {
	root, dir := genDeletedFile(t)
	stop := errors.New("stop here")
	n := 0
	_, err := ScanVHost(context.Background(), root, dir, VHostOptions{Options: scan.Options{Jobs: 2},
		EachFile: func(*VHostScan, *FileScan) error {
			n++
			if n == 2 {
				return stop
			}
			return nil
		}})
	if !errors.Is(err, stop) {
		t.Fatalf("error %v, want %v", err, stop)
	}
	if n != 2 {
		t.Errorf("%d files handed over, want 2 (none after the error)", n)
	}
}

// queueRefs maps each referenced id to the names of the queues holding a
// reference, one name per reference, sorted: read with ReadVHostQueues
// (every entry held), not the streaming reader QueuesOf uses.
func queueRefs(t *testing.T, dir string) map[string][]string {
	t.Helper()
	q, err := ReadVHostQueues(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for _, qd := range q.Queues {
		for _, r := range qd.Refs {
			out[r.MsgID] = append(out[r.MsgID], queueName(qd))
		}
	}
	for _, v := range out {
		sort.Strings(v)
	}
	return out
}

// TestQueuesOfAfterEachFile: a scan that handed its records over answers
// QueuesOf as the queue indexes read whole do (queueRefs), for referenced
// ids (one name per reference) and for ids no queue references.
func TestQueuesOfAfterEachFile(t *testing.T) {
	for _, d := range datasets {
		t.Run(d.kind+"/"+d.name, func(t *testing.T) {
			root := testutil.Untar(t, testutil.Testdata(d.kind, "datasets", d.name+".tar.gz"))
			dir := filepath.Join(root, d.node, "msg_stores", "vhosts", vhostHash)
			want := queueRefs(t, dir)
			got, err := ScanVHost(context.Background(), root, dir, VHostOptions{EachFile: func(*VHostScan, *FileScan) error { return nil }})
			if err != nil {
				t.Fatal(err)
			}
			ids := []string{"00000000000000000000000000000000"}
			for id := range want {
				if ids = append(ids, id); len(ids) > 20 {
					break
				}
			}
			multi := 0
			for _, id := range ids {
				qs, err := got.QueuesOf(id)
				if err != nil {
					t.Fatal(err)
				}
				w, _ := json.Marshal(want[id])
				g, _ := json.Marshal(qs)
				if len(qs) != len(want[id]) || (len(qs) > 0 && string(w) != string(g)) {
					t.Errorf("QueuesOf(%s) = %s, the queue indexes %s", id, g, w)
				}
				if len(qs) > 1 {
					multi++
				}
			}
			t.Logf("%d ids compared, %d referenced more than once", len(ids), multi)
		})
	}
	t.Run("generated", func(t *testing.T) {
		// A queue "dup" referencing a twice and b once, besides the
		// generator's queue of each: one name per reference, sorted.
		root := t.TempDir()
		sum, err := gen.Generate(root, gen.Config{Seed: 4, Kind: gen.MC, TotalBytes: 1 << 20, FileLimit: 256 << 10,
			Queues: 2, KeepRecords: true})
		if err != nil {
			t.Fatal(err)
		}
		a, b := sum.Written[0], sum.Written[1]
		if err := gen.WriteQueue(sum.VHostDir, "/", "dup", [][16]byte{a.ID, b.ID, a.ID}); err != nil {
			t.Fatal(err)
		}
		v, err := ScanVHost(context.Background(), root, sum.VHostDir, VHostOptions{EachFile: func(*VHostScan, *FileScan) error { return nil }})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			id   [16]byte
			want []string
		}{
			{a.ID, sortedCopy([]string{a.Queue, "dup", "dup"})},
			{b.ID, sortedCopy([]string{b.Queue, "dup"})},
			{sum.Written[2].ID, []string{sum.Written[2].Queue}},
			{[16]byte{1}, nil},
		} {
			qs, err := v.QueuesOf(hex.EncodeToString(c.id[:]))
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(qs) != fmt.Sprint(c.want) {
				t.Errorf("QueuesOf(%x) = %v, want %v", c.id, qs, c.want)
			}
		}
	})
}
