package rabbitmq

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/storectl/storectl/internal/testutil"
	rfmt "github.com/storectl/storectl/pkg/format/rabbitmq"
	"github.com/storectl/storectl/pkg/scan"
)

// FuzzVerifyCleanDumps: any bytes as msg_store_index.ets and as
// file_summary.ets: no panic, and a dump is either rejected (with a
// finding) or checked object by object against a small store (the index
// as the scan holds it: readLeanIndex, joined with the store's file). The two
// 2 KiB seeds make the engine's minimisation of new inputs slow: run it
// with -fuzzminimizetime=2s.
func FuzzVerifyCleanDumps(f *testing.F) {
	root, err := os.MkdirTemp("", "fuzz-ets")
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { os.RemoveAll(root) })
	if err := testutil.UntarTo(testutil.Testdata("rabbitmq", "datasets", "clean-shutdown.tar.gz"), root); err == nil {
		store := filepath.Join(vhostOf(root, "rmqfix@localhost"), "msg_store_persistent")
		ix, _ := os.ReadFile(filepath.Join(store, "msg_store_index.ets"))
		fs, _ := os.ReadFile(filepath.Join(store, "file_summary.ets"))
		f.Add(ix[:min(len(ix), 2048)], fs)
	}
	f.Add([]byte{1, 2, 3, 4, 0x63, 0x58, 0x4D, 0x0B}, []byte{})
	rec := &Record{File: 9, Offset: 0, TotalSize: 100, Status: StatusReferenced}
	v := &VHostScan{Files: []*FileScan{{Path: "9.rdq", Number: 9, Size: 100, Records: []*Record{rec}}},
		RefsKnown: true, Queues: &VHostQueues{RefCounts: map[string]int{rec.ID(): 1}}}
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, ix, sum []byte) {
		p := filepath.Join(dir, "msg_store_index.ets")
		if err := os.WriteFile(p, ix, 0o644); err != nil {
			t.Fatal(err)
		}
		cs := &cleanState{}
		okIx := cs.readIndexLean("/", p, true)
		okSum := cs.readSummary("/", "/s/file_summary.ets", sum)
		if len(cs.summary) != len(cs.summaryOffs) {
			t.Fatalf("summary %d/%d objects", len(cs.summary), len(cs.summaryOffs))
		}
		if want := btoi(!okIx) + btoi(!okSum); len(cs.findings) != want {
			t.Fatalf("%d findings for %d rejected dumps", len(cs.findings), want)
		}
		if li, err := readLeanIndex(p, nil); err == nil {
			li.join(v.Files[0])
			_ = li.findings(v)
			s := newScanner("/", brokerVersion{}, scan.Options{})
			s.lidx = li
			s.free()
		}
		_ = fileSummaryFindings(v, cs)
	})
}

// FuzzEntryMsgID: any bytes as the body of an embedded or .qs message.
func FuzzEntryMsgID(f *testing.F) {
	f.Add([]byte{131, 104, 1, 119, 2, 'm', 'c', 0, 0})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		id := entryMsgID(QueueEntry{Body: b})
		if id != "" && len(id) != 32 {
			t.Fatalf("id %q", id)
		}
		if p := rfmt.TrimQSPadding(b); len(p) > len(b) {
			t.Fatal("padding trim grew the blob")
		}
	})
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
