package rabbitmq

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"testing"

	gen "github.com/storectl/storectl/internal/gen/rabbitmq"
	"github.com/storectl/storectl/internal/testutil"
	rfmt "github.com/storectl/storectl/pkg/format/rabbitmq"
	"github.com/storectl/storectl/pkg/scan"
)

// verifyWith runs Verify on one vhost dir with lean verify on or off.
func verifyWith(t *testing.T, lean bool, root, dir, ver string) *scan.Result {
	t.Helper()
	res, err := Verify(context.Background(), Config{Root: root, VHostDirs: []string{dir}, BrokerVersion: ver, detailed: !lean},
		scan.Options{Jobs: 2})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// sameVerify checks that lean Verify gives exactly the detailed result
// (files, findings, queues with their at_risk and drops, layout) and
// returns the counts compared.
func sameVerify(t *testing.T, root, dir, ver string) (findings, queues, entries int) {
	t.Helper()
	want := verifyWith(t, false, root, dir, ver)
	got := verifyWith(t, true, root, dir, ver)
	a, _ := json.Marshal(want)
	b, _ := json.Marshal(got)
	if string(a) != string(b) {
		t.Errorf("lean Verify differs from the detailed one:\ndetailed %.3000s\nlean     %.3000s", a, b)
	}
	for _, q := range want.Queues {
		entries += q.Entries
	}
	if len(want.Findings) == 0 || len(want.Queues) == 0 || entries == 0 {
		t.Errorf("nothing compared: %d findings, %d queues, %d entries", len(want.Findings), len(want.Queues), entries)
	}
	return len(want.Findings), len(want.Queues), entries
}

// TestLeanVerifySameAsDetailed: on the 6 fixture datasets (the clean
// ones check their index against the lean scan's copy of it), on a
// generated store with holes, unreferenced records and a deleted file
// (message-missing findings), and on misread vhosts with and without
// --broker-version (at_risk, scanner drops), lean Verify reports exactly
// what the detailed VerifyVHost does.
func TestLeanVerifySameAsDetailed(t *testing.T) {
	defer spillAll()()
	for _, d := range datasets {
		t.Run(d.kind+"/"+d.name, func(t *testing.T) {
			root := testutil.Untar(t, testutil.Testdata(d.kind, "datasets", d.name+".tar.gz"))
			dir := filepath.Join(root, d.node, "msg_stores", "vhosts", vhostHash)
			_, err := os.Stat(filepath.Join(dir, "msg_store_persistent", "msg_store_index.ets"))
			f, q, e := sameVerify(t, root, dir, "")
			t.Logf("%d findings, %d queues, %d entries compared (clean-shutdown index: %v)", f, q, e, err == nil)
		})
	}
	t.Run("generated", func(t *testing.T) {
		root, dir := genDeletedFile(t)
		f, q, e := sameVerify(t, root, dir, "")
		lean := verifyWith(t, true, root, dir, "")
		lost := len(codes(lean.Findings, CodeMessageMissing))
		if lost == 0 {
			t.Error("no message-missing finding: the deleted file was not noticed")
		}
		t.Logf("%d findings, %d queues, %d entries compared, %d message-missing", f, q, e, lost)
	})
	t.Run("segments", func(t *testing.T) {
		// One queue of 9000 entries (three .qi segments: lean verify
		// decides it one segment at a time), referencing the store's
		// records and made-up ids no file holds; then the same with segment
		// 1's header overlapping segment 0 (lean verify reads it whole).
		root := t.TempDir()
		sum, err := gen.Generate(root, gen.Config{Seed: 5, Kind: gen.BasicMessage, TotalBytes: 4 << 20, FileLimit: 1 << 20,
			HoleEvery: 9, Queues: 1})
		if err != nil {
			t.Fatal(err)
		}
		var ids [][16]byte
		for id := range sum.Refs {
			ids = append(ids, id)
		}
		for i := 0; len(ids) < 9000; i++ {
			var id [16]byte
			binary.BigEndian.PutUint64(id[:], uint64(i)*0x9E3779B97F4A7C15+1)
			ids = append(ids, id)
		}
		if err := gen.WriteQueue(sum.VHostDir, "/", "big", ids); err != nil {
			t.Fatal(err)
		}
		f, q, e := sameVerify(t, root, sum.VHostDir, "")
		if e < 9000 {
			t.Fatalf("%d entries compared, want >= 9000", e)
		}
		t.Logf("three segments: %d findings, %d queues, %d entries compared", f, q, e)
		qi := filepath.Join(sum.VHostDir, "queues", rfmt.QueueDirName("/", "big"), "1.qi")
		b := readFile(t, qi)
		binary.BigEndian.PutUint64(b[5:], 0) // span 1: its slot 0 is seq 1, inside segment 0
		binary.BigEndian.PutUint64(b[13:], 1)
		writeFile(t, qi, b)
		if _, err := ReadQueueDirSegments(filepath.Dir(qi), rfmt.LegacySegmentEntryCount,
			func(*QueueDir, []QueueEntry) error { return nil }); !errors.Is(err, ErrSegmentOrder) {
			t.Fatalf("the tampered queue streams (%v): the whole-queue path is not tested", err)
		}
		f, q, e = sameVerify(t, root, sum.VHostDir, "")
		t.Logf("overlapping segments: %d findings, %d queues, %d entries compared", f, q, e)
	})
	t.Run("qs-damage", func(t *testing.T) {
		root, dir := unpack(t, "crash-cqv2")
		qsPath, _, storeOff, _ := flipQSBlob(t, dir)
		crc := 0
		for _, x := range verifyWith(t, true, root, dir, "").Findings {
			if x.Code == CodeQSCRC && x.Offset == storeOff && x.MsgID != "" {
				crc++
			}
		}
		if crc != 1 {
			t.Errorf("%d qs.crc findings at the flipped entry with its msg id, want 1", crc)
		}
		f, q, e := sameVerify(t, root, dir, "")
		t.Logf("crc flip: %d findings, %d queues, %d entries compared", f, q, e)
		if err := os.Remove(qsPath); err != nil {
			t.Fatal(err)
		}
		f, q, e = sameVerify(t, root, dir, "")
		t.Logf("deleted .qs: %d findings, %d queues, %d entries compared", f, q, e)
	})
	t.Run("bad-body", func(t *testing.T) {
		recs, _ := realRecords(t)
		bad := append([]byte(nil), recs[1]...)
		bad[24] = 0 // the body's ETF version byte: the frame stays, its body is no term
		root, dir, _, _ := writeVHost(t, []part{{rec: recs[0]}, {rec: bad}, {rec: recs[2]}})
		f, q, e := sameVerify(t, root, dir, "")
		n := 0
		for _, x := range verifyWith(t, true, root, dir, "").Findings {
			if x.Code == CodeMessageMissing && x.MsgID == hex.EncodeToString(bad[8:24]) {
				n++
			}
		}
		if n != 1 {
			t.Errorf("%d message-missing findings for the bad-body record, want 1", n)
		}
		t.Logf("%d findings, %d queues, %d entries compared", f, q, e)
	})
	t.Run("misread", func(t *testing.T) {
		recs, plens := realRecords(t)
		a, c := recs[0], recs[1]
		vic := victim(t, recs[0], plens[0], 4116, 0, 0xFF, 1)
		root, dir, _, _ := writeVHost(t, []part{{rec: a}, {hole: 5}, {rec: vic, victim: true}, {rec: c}})
		for _, ver := range []string{"", "3.13.7", "4.0.3", "3.12.14"} {
			want := verifyWith(t, false, root, dir, ver)
			risk := 0
			for _, q := range want.Queues {
				risk += q.AtRisk[VersionsGen1] + q.AtRisk[VersionsGen2] + q.Drop
			}
			if risk == 0 {
				t.Errorf("--broker-version %q: nothing at risk or dropped, nothing compared", ver)
			}
			f, q, e := sameVerify(t, root, dir, ver)
			t.Logf("--broker-version %q: %d findings, %d queues, %d entries compared, %d at risk or dropped", ver, f, q, e, risk)
		}
	})
}

// TestLeanVerifyCleanIndexDamage: on the clean-shutdown datasets of 3.10
// and 4.0 with a damaged msg_store_index.ets (entries moved inside their
// record, onto another record, into a missing file, two onto one place,
// ref counts too high, too low and 0, two referenced ids dropped, one id
// given twice) and a damaged file_summary.ets (a valid size off, one
// file's entry dropped, an entry for a missing file, a file size that
// cuts a record), lean Verify, which keeps neither the records nor the
// dump, reports exactly what the detailed VerifyVHost does, and each kind
// of damage shows.
func TestLeanVerifyCleanIndexDamage(t *testing.T) {
	defer spillAll()()
	for _, d := range datasets {
		if d.name != "clean-shutdown" {
			continue
		}
		t.Run(d.kind, func(t *testing.T) {
			root := testutil.Untar(t, testutil.Testdata(d.kind, "datasets", d.name+".tar.gz"))
			dir := filepath.Join(root, d.node, "msg_stores", "vhosts", vhostHash)
			store := filepath.Join(dir, "msg_store_persistent")
			ixPath := filepath.Join(store, "msg_store_index.ets")
			editIndex(t, ixPath, func(locs []rfmt.MsgLocation) []rfmt.MsgLocation {
				a, c := -1, -1
				for i := range locs {
					for j := i + 1; j < len(locs) && a < 0; j++ {
						if locs[i].File == locs[j].File && locs[i].Offset != locs[j].Offset && locs[i].RefCount > 0 {
							a, c = i, j
						}
					}
				}
				if a < 0 || len(locs) < 16 {
					t.Fatalf("%d entries, no two in one file", len(locs))
				}
				locs[c].Offset = locs[a].Offset
				locs[2].Offset += 9
				locs[3].File = 9999
				locs[4].File, locs[4].Offset = locs[a].File, locs[a].Offset
				locs[5].RefCount = 0
				locs[6].RefCount += 2
				locs[7].RefCount--
				dup := locs[8]
				dup.Offset += 3
				locs = append(locs, dup)
				return append(locs[:10], locs[12:]...) // two ids the queues may reference, gone
			})

			editSummary(t, filepath.Join(store, "file_summary.ets"), func(sums []rfmt.FileSummary) []rfmt.FileSummary {
				if len(sums) < 4 {
					t.Fatalf("%d summaries", len(sums))
				}
				sums[0].ValidTotalSize -= 25
				sums[1].FileSize = 1
				extra := sums[2]
				extra.File = 9999
				sums = append(sums[:3], sums[4:]...) // one file without an entry
				return append(sums, extra)
			})

			f, q, e := sameVerify(t, root, dir, "")
			lean := verifyWith(t, true, root, dir, "")
			kinds := map[string]int{}
			for _, x := range lean.Findings {
				switch x.Code {
				case CodeIndexMismatch:
					for k, v := range x.Evidence {
						kinds["index "+k+" "+v]++
					}
					if x.Actual == "no entry" {
						kinds["index no entry"]++
					}
				case CodeFileSummary:
					kinds["summary"]++
				}
			}
			if kinds["index location fail"] < 5 || kinds["index ref_count fail"] < 3 || kinds["summary"] < 4 {
				t.Errorf("not every kind of damage shows: %v", kinds)
			}
			t.Logf("%d findings, %d queues, %d entries compared; %v", f, q, e, kinds)
		})
	}
}

// TestGeneratedCleanShutdown: a generated store with the clean-shutdown
// files (gen.Config.CleanShutdown, what `genstore -clean` writes for the
// benchmarks) verifies as a clean state whose index and file summary agree
// with the files, lean as detailed; with one index entry moved, the one
// index.mismatch shows.
func TestGeneratedCleanShutdown(t *testing.T) {
	defer spillAll()()
	root := t.TempDir()
	sum, err := gen.Generate(root, gen.Config{Seed: 9, Kind: gen.MC, TotalBytes: 3 << 20, FileLimit: 1 << 20,
		HoleEvery: 9, UnrefEvery: 7, CleanShutdown: true})
	if err != nil {
		t.Fatal(err)
	}
	f, q, e := sameVerify(t, root, sum.VHostDir, "")
	res := verifyWith(t, true, root, sum.VHostDir, "")
	state, _ := res.Layout["shutdown"].(map[string]any)
	if state["state"] != StateClean || len(codes(res.Findings, CodeIndexMismatch))+len(codes(res.Findings, CodeFileSummary)) != 0 {
		t.Fatalf("state %v, index/summary findings %s", state["state"], summarize(res.Findings))
	}
	store := filepath.Join(sum.VHostDir, "msg_store_persistent")
	ixPath := filepath.Join(store, "msg_store_index.ets")
	entries := 0
	editIndex(t, ixPath, func(locs []rfmt.MsgLocation) []rfmt.MsgLocation {
		if entries = len(locs); entries != len(sum.Refs) {
			t.Fatalf("%d index entries for %d referenced records", len(locs), len(sum.Refs))
		}
		locs[len(locs)/2].Offset++
		return locs
	})
	sameVerify(t, root, sum.VHostDir, "")
	if n := len(codes(verifyWith(t, true, root, sum.VHostDir, "").Findings, CodeIndexMismatch)); n != 1 {
		t.Errorf("one entry moved: %d index.mismatch findings", n)
	}
	t.Logf("%d findings, %d queues, %d entries compared; %d index entries", f, q, e, entries)
}

// TestLeanCleanIndexWideValues: index entries whose file, offset, size or
// ref count do not fit the lean index's 32-bit fields (only a damaged dump
// has them: the lean index keeps them aside at full width) give the lean
// scan and verify exactly the detailed results, among them entries that
// still hold their record (a wide ref count) and ones with a wide value in
// the file of a real record.
func TestLeanCleanIndexWideValues(t *testing.T) {
	defer spillAll()()
	root, dir := unpack(t, "clean-shutdown")
	ixPath := filepath.Join(dir, "msg_store_persistent", "msg_store_index.ets")
	editIndex(t, ixPath, func(locs []rfmt.MsgLocation) []rfmt.MsgLocation {
		if len(locs) < 10 {
			t.Fatalf("%d entries", len(locs))
		}
		locs[0].RefCount = 1 << 40              // holds its record, wide ref count
		locs[1].RefCount = -1                   // negative, fits
		locs[2].File = math.MaxInt64            // no such file
		locs[3].File = -1 << 40                 // negative and wide
		locs[4].Offset = locs[4].Offset + 1<<33 // real file, wide offset
		locs[5].TotalSize = 1 << 35
		locs[6].Offset, locs[6].TotalSize = -5, -7
		return locs
	})
	n := sameLean(t, root, dir)
	f, q, e := sameVerify(t, root, dir, "")
	res := verifyWith(t, true, root, dir, "")
	mism := len(codes(res.Findings, CodeIndexMismatch))
	if mism < 6 {
		t.Errorf("%d index.mismatch findings for 7 damaged entries", mism)
	}
	t.Logf("scan: %d findings compared; verify: %d findings, %d queues, %d entries compared, %d index.mismatch", n, f, q, e, mism)
}
