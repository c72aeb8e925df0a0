package rabbitmq

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"

	"github.com/storectl/storectl/internal/testutil"
	rfmt "github.com/storectl/storectl/pkg/format/rabbitmq"
	"github.com/storectl/storectl/pkg/scan"
)

// Queue dirs of the fixtures (README: q1, q2, q4).
const (
	q1Dir = "6GR38JRPIL3M68J7JM8E1SMBO"
	q2Dir = "KANL8CE0UDO3DXGEUF3GF2Q3"
	q4Dir = "BBLAWLQ242Q038SS4SQ12H88L"
)

// unpack extracts a 3.10 dataset and returns root and its vhost dir.
func unpack(t *testing.T, name string) (root, dir string) {
	t.Helper()
	root = testutil.Untar(t, testutil.Testdata("rabbitmq", "datasets", name+".tar.gz"))
	return root, vhostOf(root, "rmqfix@localhost")
}

func writeFile(t *testing.T, p string, b []byte) {
	t.Helper()
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// only asserts exactly one finding of code at path (relative to root's
// vhost dir) and returns it; the caller checks the offset.
func only(t *testing.T, vv *scan.Result, code, path string) scan.Finding {
	t.Helper()
	var got []scan.Finding
	for _, f := range codes(vv.Findings, code) {
		if f.Path == path {
			got = append(got, f)
		}
	}
	if len(got) != 1 {
		t.Fatalf("%d %s findings at %s, want 1 (all: %s)", len(got), code, path, summarize(vv.Findings))
	}
	return got[0]
}

func queueFate(t *testing.T, vv *scan.Result, dir string) scan.Queue {
	t.Helper()
	for _, q := range vv.Queues {
		if q.Dir == dir {
			return q
		}
	}
	t.Fatalf("no queue %s", dir)
	return scan.Queue{}
}

// qiSlots returns the offsets of the present slots of a .qi file with the
// given location type (§5.1), read straight from the bytes.
func qiSlots(b []byte, loc byte) []int {
	var out []int
	for off := 64; off+32 <= len(b); off += 32 {
		if b[off] == 1 && b[off+3] == loc {
			out = append(out, off)
		}
	}
	return out
}

// flipQSBlob flips a byte in the middle of the blob of q1's first .qs
// entry (crash-cqv2's q1 has .qs entries in 0.qi/0.qs) and returns the
// .qs path, its bytes before the flip, the entry's offset in it and the
// number of q1's .qs slots.
func flipQSBlob(t *testing.T, dir string) (qsPath string, orig []byte, storeOff int64, nslots int) {
	t.Helper()
	qdir := filepath.Join(dir, "queues", q1Dir)
	qi := readFile(t, filepath.Join(qdir, "0.qi"))
	slots := qiSlots(qi, 2)
	if len(slots) == 0 {
		t.Fatal("q1 has no .qs entries")
	}
	off := binary.BigEndian.Uint64(qi[slots[0]+4:])
	size := binary.BigEndian.Uint32(qi[slots[0]+12:])
	qsPath = filepath.Join(qdir, "0.qs")
	orig = readFile(t, qsPath)
	qs := bytes.Clone(orig)
	qs[off+8+uint64(size)/2] ^= 0xFF
	writeFile(t, qsPath, qs)
	return qsPath, orig, int64(off), len(slots)
}

// zeroRecords zeroes every framed .rdq record of id in the vhost's store.
func zeroRecords(t *testing.T, dir string, id []byte) int {
	t.Helper()
	store := filepath.Join(dir, "msg_store_persistent")
	ents, err := os.ReadDir(store)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range ents {
		p := filepath.Join(store, e.Name())
		b := readFile(t, p)
		for i := bytes.Index(b, id); i >= 8; {
			size := binary.BigEndian.Uint64(b[i-8:])
			if end := uint64(i) + size; size >= 16 && end < uint64(len(b)) && b[end] == 0xFF {
				clear(b[i-8 : end+1])
				n++
			}
			j := bytes.Index(b[i+1:], id)
			if j < 0 {
				break
			}
			i += 1 + j
		}
		writeFile(t, p, b)
	}
	return n
}

// TestVerifyMessageMissing: a v2 .qi entry (crash-cqv2) and a v1 .idx
// publish (crash) whose .rdq record is zeroed give message-missing at that
// entry's offset, and the queue drops exactly that message.
func TestVerifyMessageMissing(t *testing.T) {
	for _, c := range []struct{ dataset, file string }{{"crash-cqv2", "0.qi"}, {"crash", "0.idx"}} {
		root, dir := unpack(t, c.dataset)
		before := queueFate(t, verifyDir(t, root, dir, ""), q1Dir)
		idx := readFile(t, filepath.Join(dir, "queues", q1Dir, c.file))
		other := readFile(t, filepath.Join(dir, "queues", q2Dir, c.file))
		var id []byte
		var want int
		if c.file == "0.qi" {
			for _, off := range qiSlots(idx, 1) {
				if cand := idx[off+4 : off+20]; !bytes.Contains(other, cand) {
					id, want = cand, off
					break
				}
			}
		} else {
			for _, ef := range entryFates(t, root, dir, "")[q1Dir] {
				cand, _ := hex.DecodeString(ef.MsgID)
				if ef.Record != nil && !bytes.Contains(other, cand) && bytes.Count(idx, cand) == 1 {
					id, want = cand, bytes.Index(idx, cand)-2 // <<1:1,P:1,RelSeq:14, MsgId:16/binary, ...>>
					break
				}
			}
		}
		if id == nil || zeroRecords(t, dir, id) == 0 {
			t.Fatalf("%s: no q1-only shared-store message to remove", c.dataset)
		}
		vv := verifyDir(t, root, dir, "")
		rel := scan.Rel(root, filepath.Join(dir, "queues", q1Dir, c.file))
		f := only(t, vv, CodeMessageMissing, rel)
		q := queueFate(t, vv, q1Dir)
		if f.Offset != int64(want) || f.MsgID != hex.EncodeToString(id) || f.Severity != scan.Error ||
			q.Keep != before.Keep-1 || q.DropMsgIDs.Len() != 1 || q.DropMsgIDs.Strings()[0] != f.MsgID {
			t.Errorf("%s: finding %+v (want offset %d), q1 keep %d (was %d), drops %v", c.dataset, f, want, q.Keep, before.Keep, q.DropMsgIDs)
		}
		t.Logf("%s: %s@%d msg %s; q1 keeps %d of %d", c.dataset, f.Path, f.Offset, f.MsgID, q.Keep, q.Entries)
	}
}

// TestVerifyQueueStoreDamage: a flipped .qs blob byte gives one qs.crc at
// the .qs entry and drops that entry; a deleted .qs gives one bad-entry
// finding at the .qs path for all its entries and drops them; a torn .qi
// tail gives one torn-entry at the old end of file.
func TestVerifyQueueStoreDamage(t *testing.T) {
	root, dir := unpack(t, "crash-cqv2")
	qdir := filepath.Join(dir, "queues", q1Dir)
	before := queueFate(t, verifyDir(t, root, dir, ""), q1Dir)
	qi := readFile(t, filepath.Join(qdir, "0.qi"))
	qsPath, orig, storeOff, nslots := flipQSBlob(t, dir)
	vv := verifyDir(t, root, dir, "")
	f := only(t, vv, CodeQSCRC, scan.Rel(root, qsPath))
	q := queueFate(t, vv, q1Dir)
	if f.Offset != storeOff || f.Severity != scan.Error || q.Keep != before.Keep-1 || len(codes(vv.Findings, CodeQSCRC)) != 1 {
		t.Errorf("crc flip: %+v (want offset %d), keep %d was %d", f, storeOff, q.Keep, before.Keep)
	}
	t.Logf("crc flip: %s@%d %s; q1 drops %v", f.Path, f.Offset, f.Message, q.DropMsgIDs)

	if err := os.Remove(qsPath); err != nil {
		t.Fatal(err)
	}
	vv = verifyDir(t, root, dir, "")
	f = only(t, vv, CodeQSBadEntry, scan.Rel(root, qsPath))
	q = queueFate(t, vv, q1Dir)
	if f.Offset != 0 || q.Keep != before.Keep-nslots || q.Drop != nslots {
		t.Errorf("deleted .qs: %+v; keep %d drop %d, want %d dropped", f, q.Keep, q.Drop, nslots)
	}
	t.Logf("deleted .qs: %s@%d %v; q1 keeps %d, drops %d", f.Path, f.Offset, f.Details, q.Keep, q.Drop)

	writeFile(t, qsPath, orig)
	writeFile(t, filepath.Join(qdir, "0.qi"), append(bytes.Clone(qi), 1, 1, 0, 1, 9, 9, 9))
	vv = verifyDir(t, root, dir, "")
	f = only(t, vv, CodeQITorn, scan.Rel(root, filepath.Join(qdir, "0.qi")))
	if f.Offset != int64(len(qi)) || queueFate(t, vv, q1Dir).Keep != before.Keep {
		t.Errorf("torn .qi: %+v, want offset %d", f, len(qi))
	}
}

// TestVerifyCleanIndexDamage: on the 3.10 clean-shutdown, one
// msg_store_index.ets entry re-encoded with a moved offset gives one
// index.mismatch at that object naming its msg id; one file_summary.ets
// valid size changed gives one file-summary finding at that object.
func TestVerifyCleanIndexDamage(t *testing.T) {
	root, dir := unpack(t, "clean-shutdown")
	store := filepath.Join(dir, "msg_store_persistent")
	ixPath := filepath.Join(store, "msg_store_index.ets")
	orig := readFile(t, ixPath)
	var locs []rfmt.MsgLocation
	i := 0
	b := editIndex(t, ixPath, func(l []rfmt.MsgLocation) []rfmt.MsgLocation {
		for l[i].RefCount == 0 {
			i++
		}
		l[i].Offset += 9
		locs = l
		return l
	})
	re, err := rfmt.ReadETSFile(b)
	if err != nil {
		t.Fatal(err)
	}
	vv := verifyDir(t, root, dir, "")
	f := only(t, vv, CodeIndexMismatch, scan.Rel(root, ixPath))
	if vv.Layout["shutdown"].(map[string]any)["state"] != StateClean || f.Offset != re.ObjOffs[i] || f.MsgID != hex.EncodeToString(locs[i].MsgID[:]) ||
		f.Severity != scan.Error || len(codes(vv.Findings, CodeIndexMismatch)) != 1 {
		t.Errorf("moved offset: %+v, want offset %d msg %x (%s)", f, re.ObjOffs[i], locs[i].MsgID, summarize(vv.Findings))
	}
	t.Logf("moved offset: %s@%d %s", f.Path, f.Offset, f.Message)
	writeFile(t, ixPath, orig)

	fsPath := filepath.Join(store, "file_summary.ets")
	var sums []rfmt.FileSummary
	j := 0
	b = editSummary(t, fsPath, func(s []rfmt.FileSummary) []rfmt.FileSummary {
		j = len(s) / 2
		s[j].ValidTotalSize -= 25
		sums = s
		return s
	})
	if re, err = rfmt.ReadETSFile(b); err != nil {
		t.Fatal(err)
	}
	vv = verifyDir(t, root, dir, "")
	f = only(t, vv, CodeFileSummary, scan.Rel(root, fsPath))
	if f.Offset != re.ObjOffs[j] || f.Severity != scan.Error || len(codes(vv.Findings, CodeFileSummary)) != 1 ||
		f.Details["file"] != sums[j].File {
		t.Errorf("valid size: %+v, want offset %d file %d", f, re.ObjOffs[j], sums[j].File)
	}
	t.Logf("valid size: %s@%d %s", f.Path, f.Offset, f.Message)
}

// TestVerifyOrphanQueueDir: a copy of q4's dir under another name (its
// .queue_name hashes elsewhere) is an orphan the broker deletes: one
// queue.orphan at the dir, all its entries dropped, the real queues as
// before.
func TestVerifyOrphanQueueDir(t *testing.T) {
	root, dir := unpack(t, "crash")
	before := verifyDir(t, root, dir, "")
	src := filepath.Join(dir, "queues", q4Dir)
	dst := filepath.Join(dir, "queues", "ZZORPHAN0000000000000000")
	if err := os.Mkdir(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	ents, _ := os.ReadDir(src)
	for _, e := range ents {
		writeFile(t, filepath.Join(dst, e.Name()), readFile(t, filepath.Join(src, e.Name())))
	}
	vv := verifyDir(t, root, dir, "")
	f := only(t, vv, CodeQueueOrphan, scan.Rel(root, dst))
	o := queueFate(t, vv, filepath.Base(dst))
	if f.Offset != 0 || o.Keep != 0 || o.Drop != o.Entries || o.Entries == 0 || len(codes(vv.Findings, CodeQueueOrphan)) != 1 {
		t.Errorf("orphan: %+v; keep %d drop %d of %d", f, o.Keep, o.Drop, o.Entries)
	}
	for _, q := range before.Queues {
		if n := queueFate(t, vv, q.Dir); n.Keep != q.Keep || n.Drop != q.Drop {
			t.Errorf("queue %s: keep %d drop %d, was %d/%d", q.Dir, n.Keep, n.Drop, q.Keep, q.Drop)
		}
	}
	t.Logf("orphan: %s (%v)", f.Message, f.Details)
}
