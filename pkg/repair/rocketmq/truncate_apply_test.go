package rocketmq

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/storectl/storectl/internal/testutil"
	rmq "github.com/storectl/storectl/pkg/format/rocketmq"
	"github.com/storectl/storectl/pkg/repair"
	scanrmq "github.com/storectl/storectl/pkg/scan/rocketmq"
)

// trShortStore unpacks a-clean and cuts its last commitlog file in the
// middle of its last record (as d-torn-trunc does, which the real broker
// refuses to load). It returns the store, the file, the record's offset
// in it and the file's original bytes.
func trShortStore(t *testing.T) (store, file string, pos int64, orig []byte) {
	t.Helper()
	var last trOracleLine
	for _, l := range trOracle(t, "rmq533-a-clean.decode.jsonl") {
		if l.Kind == "msg" {
			last = l
		}
	}
	store = trStore(t, "rmq533-a-clean")
	file = filepath.Join(store, "commitlog", last.File)
	orig, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(file, last.Pos+last.TotalSize/2); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(file, trFixedTime, trFixedTime); err != nil { // every copy pins the same plan
		t.Fatal(err)
	}
	return store, file, last.Pos, orig
}

// trFixedTime is the mtime given to the test-made short file.
var trFixedTime = time.Date(2026, 11, 29, 23, 50, 0, 0, time.UTC)

// TestTruncateShortLastFile: a last commitlog file cut mid-record is cut
// at its last whole record and padded back to the mapped size; the
// consume queues then match the real recovery of the same store with the
// same last record dropped (d-torn-crc).
func TestTruncateShortLastFile(t *testing.T) {
	store, file, pos, orig := trShortStore(t)
	st, err := os.Stat(filepath.Join(store, "commitlog", rmq.FormatFileName(0)))
	if err != nil {
		t.Fatal(err)
	}
	mapped := st.Size()
	end, cqs := trRecovered(t, "rmq533-d-torn-crc.recover.jsonl")
	p, rep := trPlan(t, store)
	base, _ := rmq.ParseFileName(filepath.Base(file))
	if rep.RecoveryEnd != base+pos || rep.RecoveryEnd != end {
		t.Fatalf("recovery end %d, want %d (oracle of the same record dropped: %d)", rep.RecoveryEnd, base+pos, end)
	}
	var ops []repair.Op
	for _, a := range p.Actions {
		if filepath.Join(store, a.Path) == file {
			ops = append(ops, a.Op)
			if a.Op == repair.OpResizeFile && (a.NewSize != mapped || a.Reason != scanrmq.CodeShortFile) {
				t.Errorf("resize %+v, want new size %d for %s", a, mapped, scanrmq.CodeShortFile)
			}
			if a.Op == repair.OpZeroRange && (a.Offset != pos || a.Reason != scanrmq.CodeTornTail || a.Lost.Records != 1) {
				t.Errorf("zero %+v, want from %d for %s, 1 record lost", a, pos, scanrmq.CodeTornTail)
			}
		}
	}
	if fmt.Sprint(ops) != fmt.Sprint([]repair.Op{repair.OpZeroRange, repair.OpResizeFile}) {
		t.Fatalf("ops on the short file %v, want zero-range then resize-file", ops)
	}
	if _, _, err := trApply(t, p, repair.Faults{}); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if int64(len(got)) != mapped {
		t.Fatalf("size %d after apply, want the mapped size %d", len(got), mapped)
	}
	if !bytes.Equal(got[:pos], orig[:pos]) {
		t.Fatal("bytes before the cut changed")
	}
	if !bytes.Equal(got[pos:], make([]byte, mapped-pos)) {
		t.Fatal("bytes from the cut to the mapped size are not all zero")
	}
	n := trSameCQs(t, cqs, trReadCQs(t, store))
	t.Logf("cut at %d, padded to %d; %d CQ units compared with the real recovery", pos, mapped, n)
	trScanClean(t, store, end)
}

// TestTruncateApplyFaults fails Apply at every counted write step of the
// d-torn-crc and short-file plans: each run errors and leaves the store
// byte-identical.
func TestTruncateApplyFaults(t *testing.T) {
	cases := map[string]func(t *testing.T) string{
		"d-torn-crc": func(t *testing.T) string { return trStore(t, "rmq533-d-torn-crc") },
		"short-file": func(t *testing.T) string { s, _, _, _ := trShortStore(t); return s },
	}
	for name, mk := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			p, _ := trPlan(t, mk(t))
			ref := *p
			rep, _, err := trApply(t, &ref, repair.Faults{})
			if err != nil {
				t.Fatal(err)
			}
			steps := rep.Steps
			for n := 1; n <= steps; n++ {
				t.Run(fmt.Sprint(n), func(t *testing.T) {
					t.Parallel()
					store := mk(t)
					before := testutil.TreeHash(t, store)
					q := *p // same bytes and mtimes in every copy: only the dir differs
					q.DataDir = store
					rep, _, err := trApply(t, &q, repair.Faults{FailAtWrite: n})
					if err == nil && len(rep.Warnings) > 0 {
						return // only manifest.json's rewrite after the journal recorded the apply: it stands (pkg/repair)
					}
					if !errors.Is(err, repair.ErrInjected) {
						t.Fatalf("step %d/%d: err %v, want the injected fault", n, steps, err)
					}
					testutil.SameTree(t, before, testutil.TreeHash(t, store))
				})
			}
			t.Logf("%d write steps, each failed once", steps)
		})
	}
}

// TestTruncateMidStoreEnd: a damaged record in the second commitlog file
// ends recovery there. The rest of that file is zeroed, the two later
// files (whose records the decode oracle counts) go to the backup, and
// every consume queue keeps exactly its raw units before the end (CQ
// files that start past it removed); Undo restores everything.
func TestTruncateMidStoreEnd(t *testing.T) {
	const ds = "rmq533-a-clean"
	var victim trOracleLine
	msgs := map[string]int64{}
	for _, l := range trOracle(t, ds+".decode.jsonl") {
		if l.Kind == "msg" {
			if msgs[l.File]++; l.File == rmq.FormatFileName(262144) && msgs[l.File] == 10 {
				victim = l
			}
		}
	}
	store := trStore(t, ds)
	file := filepath.Join(store, "commitlog", victim.File)
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	b[victim.Pos+28+7] ^= 0x40 // low byte of the stored PHYSICALOFFSET: a stale record
	if err := os.WriteFile(file, b, 0o644); err != nil {
		t.Fatal(err)
	}
	testutil.RecoverFromFirstFile(t, store)
	orig := testutil.TreeHash(t, store)
	p, rep := trPlan(t, store)
	end := victim.PhyOffset
	if rep.RecoveryEnd != end || rep.Reason != scanrmq.CodeStaleRecord {
		t.Fatalf("end %d (%s), want %d", rep.RecoveryEnd, rep.Reason, end)
	}
	removed := map[string]int64{}
	for _, a := range p.Actions {
		if a.Op == repair.OpRemoveFile && filepath.Dir(a.Path) == "commitlog" {
			removed[filepath.Base(a.Path)] = a.Lost.Records
		}
	}
	for _, f := range []string{rmq.FormatFileName(524288), rmq.FormatFileName(786432)} {
		if r, ok := removed[f]; !ok || r != msgs[f] {
			t.Errorf("commitlog/%s: removed %v with %d records lost, the oracle holds %d", f, ok, r, msgs[f])
		}
	}
	if len(removed) != 2 {
		t.Errorf("removed commitlog files %v, want the two after the end", removed)
	}
	want := map[string][][]int64{}
	for q, units := range trRawCQ(t, ds+".decode.jsonl") {
		i := 0
		for i < len(units) && units[i][1] < end {
			i++
		}
		want[q] = units[:i]
	}
	_, bdir, err := trApply(t, p, repair.Faults{})
	if err != nil {
		t.Fatal(err)
	}
	n := trSameCQs(t, want, trReadCQs(t, store))
	t.Logf("end %d in %s; %d CQ units kept, %d CQ actions", end, victim.File, n, len(rep.ConsumeQueues))
	trScanClean(t, store, end)
	if _, err := repair.Undo(context.Background(), bdir, repair.UndoOptions{Apply: true}); err != nil {
		t.Fatal(err)
	}
	testutil.SameTree(t, orig, testutil.TreeHash(t, store))
}
