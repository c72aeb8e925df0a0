package rabbitmq

import (
	"context"
	"encoding/binary"
	"encoding/hex"
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

// verifyWith runs Verify on one vhost dir at --jobs 2.
func verifyWith(t *testing.T, root, dir, ver string) *scan.Result {
	t.Helper()
	res, err := Verify(context.Background(), Config{Root: root, VHostDirs: []string{dir}, BrokerVersion: ver},
		scan.Options{Jobs: 2})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// queueLine returns the queue line of res named name.
func queueLine(t *testing.T, res *scan.Result, name string) scan.Queue {
	t.Helper()
	for _, q := range res.Queues {
		if q.Queue == name {
			return q
		}
	}
	t.Fatalf("no queue line for %s", name)
	return scan.Queue{}
}

// TestVerifyPredicts: Verify's queue lines and findings against what is
// known without it: a generated store with a deleted file (each queue
// keeps its referenced records the generator wrote to the other files and
// drops those of the deleted one, each with a message-missing finding), a
// queue of three .qi segments referencing made-up ids too (decided a
// segment at a time, then, with overlapping segments, whole), a flipped
// and a deleted .qs, a record with a bad body, and a misread vhost with
// and without --broker-version (at_risk, scanner drops).
func TestVerifyPredicts(t *testing.T) {
	defer spillAll()()
	t.Run("generated", func(t *testing.T) {
		root, dir, sum := genDeletedFileSum(t)
		res := verifyWith(t, root, dir, "")
		entries, drop := map[string]int{}, map[string]int{}
		missing := map[string]bool{}
		for _, w := range sum.Written {
			if w.Queue == "" {
				continue
			}
			entries[w.Queue]++
			if w.File == 1 {
				drop[w.Queue]++
				missing[hex.EncodeToString(w.ID[:])] = true
			}
		}
		for name, n := range entries {
			q := queueLine(t, res, name)
			if q.Entries != n || q.Drop != drop[name] || q.Keep != n-drop[name] || q.DropMsgIDs.Len() != min(drop[name], InlineQueueIDs) {
				t.Errorf("%s: %d entries, keep %d, drop %d (%d ids named); written %d, %d in the deleted file", name, q.Entries, q.Keep, q.Drop, q.DropMsgIDs.Len(), n, drop[name])
			}
		}
		fs := codes(res.Findings, CodeMessageMissing)
		for _, f := range fs {
			if !missing[f.MsgID] {
				t.Errorf("message-missing %s: not in the deleted file", f.MsgID)
			}
		}
		if len(fs) != len(missing) || len(res.Queues) != len(entries) {
			t.Errorf("%d message-missing findings, %d referenced records deleted; %d queue lines, %d queues", len(fs), len(missing), len(res.Queues), len(entries))
		}
		t.Logf("%d queues, %d message-missing", len(entries), len(fs))
	})
	t.Run("segments", func(t *testing.T) {
		// One queue of 9000 entries (three .qi segments: verify decides
		// it one segment at a time), referencing the store's records and
		// made-up ids no file holds; then the same with segment 1's header
		// overlapping segment 0 (verify reads it whole).
		root, sum := genBigQueue(t)
		made := 9000 - len(sum.Refs)
		q := queueLine(t, verifyWith(t, root, sum.VHostDir, ""), "big")
		if q.Entries != 9000 || q.Keep != len(sum.Refs) || q.Drop != made {
			t.Errorf("three segments: %d entries, keep %d, drop %d; want 9000, %d, %d", q.Entries, q.Keep, q.Drop, len(sum.Refs), made)
		}
		qi := overlapSegments(t, sum.VHostDir)
		if _, err := ReadQueueDirSegments(filepath.Dir(qi), rfmt.LegacySegmentEntryCount,
			func(*QueueDir, []QueueEntry) error { return nil }); !errors.Is(err, ErrSegmentOrder) {
			t.Fatalf("the tampered queue streams (%v): the whole-queue path is not tested", err)
		}
		q2 := queueLine(t, verifyWith(t, root, sum.VHostDir, ""), "big")
		t.Logf("overlapping segments: %+v", q2)
	})
	t.Run("qs-damage", func(t *testing.T) {
		root, dir := unpack(t, "crash-cqv2")
		qsPath, _, storeOff, _ := flipQSBlob(t, dir)
		crc := 0
		for _, x := range verifyWith(t, root, dir, "").Findings {
			if x.Code == CodeQSCRC && x.Offset == storeOff && x.MsgID != "" {
				crc++
			}
		}
		if crc != 1 {
			t.Errorf("%d qs.crc findings at the flipped entry with its msg id, want 1", crc)
		}
		if err := os.Remove(qsPath); err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, x := range verifyWith(t, root, dir, "").Findings {
			if x.Path == scan.Rel(root, qsPath) {
				n++
			}
		}
		if n == 0 {
			t.Errorf("deleted .qs: no finding names it")
		}
	})
	t.Run("bad-body", func(t *testing.T) {
		recs, _ := realRecords(t)
		bad := append([]byte(nil), recs[1]...)
		bad[24] = 0 // the body's ETF version byte: the frame stays, its body is no term
		root, dir, _, _ := writeVHost(t, []part{{rec: recs[0]}, {rec: bad}, {rec: recs[2]}})
		n := 0
		for _, x := range verifyWith(t, root, dir, "").Findings {
			if x.Code == CodeMessageMissing && x.MsgID == hex.EncodeToString(bad[8:24]) {
				n++
			}
		}
		if n != 1 {
			t.Errorf("%d message-missing findings for the bad-body record, want 1", n)
		}
	})
	t.Run("misread", func(t *testing.T) {
		recs, plens := realRecords(t)
		a, c := recs[0], recs[1]
		vic := victim(t, recs[0], plens[0], 4116, 0, 0xFF, 1)
		root, dir, _, _ := writeVHost(t, []part{{rec: a}, {hole: 5}, {rec: vic, victim: true}, {rec: c}})
		for _, ver := range []string{"", "3.13.7", "4.0.3", "3.12.14"} {
			res := verifyWith(t, root, dir, ver)
			risk := 0
			for _, q := range res.Queues {
				risk += q.AtRisk[VersionsGen1] + q.AtRisk[VersionsGen2] + q.Drop
			}
			if risk == 0 {
				t.Errorf("--broker-version %q: nothing at risk or dropped", ver)
			}
			t.Logf("--broker-version %q: %d at risk or dropped", ver, risk)
		}
	})
}

// TestLeanVerifyCleanIndexDamage: on the clean-shutdown datasets of 3.10
// and 4.0 with a damaged msg_store_index.ets (entries moved inside their
// record, onto another record, into a missing file, two onto one place,
// ref counts too high, too low and 0, two referenced ids dropped, one id
// given twice) and a damaged file_summary.ets (a valid size off, one
// file's entry dropped, an entry for a missing file, a file size that
// cuts a record), Verify, which keeps neither the records nor the
// dump, reports each kind of damage.
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

			lean := verifyWith(t, root, dir, "")
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
			t.Logf("%v", kinds)
		})
	}
}

// TestGeneratedCleanShutdown: a generated store with the clean-shutdown
// files (gen.Config.CleanShutdown, what `genstore -clean` writes for the
// benchmarks) verifies as a clean state whose index and file summary agree
// with the files; with one index entry moved, the one index.mismatch
// shows.
func TestGeneratedCleanShutdown(t *testing.T) {
	defer spillAll()()
	root := t.TempDir()
	sum, err := gen.Generate(root, gen.Config{Seed: 9, Kind: gen.MC, TotalBytes: 3 << 20, FileLimit: 1 << 20,
		HoleEvery: 9, UnrefEvery: 7, CleanShutdown: true})
	if err != nil {
		t.Fatal(err)
	}
	res := verifyWith(t, root, sum.VHostDir, "")
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
	if n := len(codes(verifyWith(t, root, sum.VHostDir, "").Findings, CodeIndexMismatch)); n != 1 {
		t.Errorf("one entry moved: %d index.mismatch findings", n)
	}
	t.Logf("%d index entries", entries)
}

// TestLeanCleanIndexWideValues: index entries whose file, offset, size or
// ref count do not fit the lean index's 32-bit fields (only a damaged dump
// has them: the off-heap index keeps them aside at full width) give
// index.mismatch findings in verify, among them entries that still hold
// their record (a wide ref count) and ones with a wide value in the file
// of a real record.
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
	res := verifyWith(t, root, dir, "")
	mism := len(codes(res.Findings, CodeIndexMismatch))
	if mism < 6 {
		t.Errorf("%d index.mismatch findings for 7 damaged entries", mism)
	}
	sres := scanWith(t, root, dir, nil)
	t.Logf("verify: %d index.mismatch; scan: %d", mism, len(codes(sres.Findings, CodeIndexMismatch)))
}

// genBigQueue generates a store with one queue "big" of 9000 entries
// (three .qi segments) referencing the store's records and made-up ids no
// file holds.
func genBigQueue(t *testing.T) (string, *gen.Summary) {
	t.Helper()
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
	return root, sum
}

// overlapSegments makes segment 1 of genBigQueue's queue overlap segment
// 0 (verify then decides the queue whole) and returns its .qi path.
func overlapSegments(t *testing.T, vhostDir string) string {
	t.Helper()
	qi := filepath.Join(vhostDir, "queues", rfmt.QueueDirName("/", "big"), "1.qi")
	b := readFile(t, qi)
	binary.BigEndian.PutUint64(b[5:], 0) // span 1: its slot 0 is seq 1, inside segment 0
	binary.BigEndian.PutUint64(b[13:], 1)
	writeFile(t, qi, b)
	return qi
}
