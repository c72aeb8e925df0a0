package rabbitmq

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"

	gen "github.com/storectl/storectl/internal/gen/rabbitmq"
	"github.com/storectl/storectl/internal/testutil"
	rfmt "github.com/storectl/storectl/pkg/format/rabbitmq"
	"github.com/storectl/storectl/pkg/scan"
)

// verifyWith runs Verify on one vhost dir with lean verify on or off.
func verifyWith(t *testing.T, lean bool, root, dir, ver string) *scan.Result {
	t.Helper()
	old := verifyLean
	verifyLean = lean
	defer func() { verifyLean = old }()
	res, err := Verify(context.Background(), Config{Root: root, VHostDirs: []string{dir}, BrokerVersion: ver},
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

// TestLeanVerifySameAsDetailed: on the 6 fixture datasets (the clean ones
// take the detailed path, their index checks need every record), on a
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
			t.Logf("%d findings, %d queues, %d entries compared (lean path: %v)", f, q, e, err != nil)
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
		// The at-risk and drop lists compared above went through the
		// spool (spillAll: chunks of two ids).
		spilled, ids := 0, 0
		for _, q := range lean.Queues {
			for _, l := range append([]scan.MsgIDs{q.DropMsgIDs}, slices.Collect(maps.Values(q.AtRiskMsgIDs))...) {
				if l.Spilled() {
					spilled++
					ids += l.Len()
				}
			}
		}
		if spilled == 0 {
			t.Error("no queue id list was spilled: the spool is not compared")
		}
		t.Logf("%d findings, %d queues, %d entries compared, %d message-missing, %d spilled id lists (%d ids)",
			f, q, e, lost, spilled, ids)
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
		if _, err := rfmt.ReadQueueDirSegments(filepath.Dir(qi), rfmt.LegacySegmentEntryCount,
			func(*rfmt.QueueDir, []rfmt.QueueEntry) error { return nil }); !errors.Is(err, rfmt.ErrSegmentOrder) {
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
			if x.Code == rfmt.CodeQSCRC && x.Offset == storeOff && x.MsgID != "" {
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
