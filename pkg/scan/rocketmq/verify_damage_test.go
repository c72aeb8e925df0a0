package rocketmq

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	rmq "github.com/storectl/storectl/pkg/format/rocketmq"
	"github.com/storectl/storectl/pkg/scan"
)

// Fixture index geometry (README: maxHashSlotNum 100, maxIndexNum 400).
var fixtureIndex = rmq.IndexLayout{Slots: 100, Entries: 400}

// vpatch overwrites b at off in root/rel.
func vpatch(t *testing.T, root, rel string, off int64, b []byte) {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(root, filepath.FromSlash(rel)), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

func readAt(t *testing.T, root, rel string, off int64, n int) []byte {
	t.Helper()
	f, err := os.Open(filepath.Join(root, filepath.FromSlash(rel)))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, n)
	if _, err := f.ReadAt(b, off); err != nil {
		t.Fatal(err)
	}
	return b
}

func indexFiles(t *testing.T, root string) []string {
	ents, err := os.ReadDir(filepath.Join(root, "index"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		out = append(out, "index/"+e.Name())
	}
	return out
}

// expectOnly fails unless the warning/error findings are exactly want
// ("code path@offset"); it returns them by key.
func expectOnly(t *testing.T, res *scan.Result, want map[string]bool) map[string]scan.Finding {
	t.Helper()
	got := map[string]scan.Finding{}
	for _, f := range warnings(res) {
		k := fmt.Sprintf("%s %s@%d", f.Code, f.Path, f.Offset)
		got[k] = f
		if !want[k] {
			t.Errorf("unexpected %s", fmtFinding(f))
		}
	}
	for k := range want {
		if _, ok := got[k]; !ok {
			t.Errorf("missing finding %s", k)
		}
	}
	return got
}

const dmgDS = "rmq533-a-clean"

func dmgOracle(t *testing.T) map[queueKey][][]int64 {
	return readCQOracle(t, dmgDS+".decode.jsonl", "raw_consume_queue", "")
}

// verifyMidMessageUnit verifies dmgDS with TopicA/0's unit 3 moved 10
// bytes into its message; it returns the root, the result, the consume
// queue file's path and the unit's oracle row (queue offset, phy offset).
func verifyMidMessageUnit(t *testing.T) (root string, res *scan.Result, p string, u []int64) {
	t.Helper()
	k := queueKey{"TopicA", 0}
	u = dmgOracle(t)[k][3]
	p, off := unitPlace(k, u[0])
	root, res = verifyDataset(t, dmgDS, func(root string) {
		vpatch(t, root, p, off, binary.BigEndian.AppendUint64(nil, uint64(u[1]+10)))
	})
	return root, res, p, u
}

// TestVerifyCQUnitMidMessage: a unit moved 10 bytes into its message is
// a bad-unit at that unit, and its message is then lost (no unit).
func TestVerifyCQUnitMidMessage(t *testing.T) {
	_, res, p, u := verifyMidMessageUnit(t)
	got := expectOnly(t, res, map[string]bool{CodeCQBadUnit + " " + p + "@60": true, CodeCQMissing + " " + p + "@60": true})
	if f := got[CodeCQBadUnit+" "+p+"@60"]; f.Severity != scan.Error || f.Evidence["record_start"] != "fail" || f.Repair != scan.RepairRebuildIndex {
		t.Errorf("bad unit: %s", fmtFinding(f))
	}
	if f := got[CodeCQMissing+" "+p+"@60"]; f.Details["phy_offset"] != u[1] || f.Details["state"] != "lost" {
		t.Errorf("missing: %s %v", fmtFinding(f), f.Details)
	}
}

// TestVerifyCQTagsAndSize: a flipped tags code and a changed size are
// bad-units at their units, naming the field; the messages still count
// as dispatched.
func TestVerifyCQTagsAndSize(t *testing.T) {
	o := dmgOracle(t)
	kt, ks := queueKey{"TopicB", 0}, queueKey{"TopicC-v6", 0}
	ut, us := o[kt][2], o[ks][4]
	pt, offt := unitPlace(kt, ut[0])
	ps, offs := unitPlace(ks, us[0])
	_, res := verifyDataset(t, dmgDS, func(root string) {
		vpatch(t, root, pt, offt+12, binary.BigEndian.AppendUint64(nil, uint64(ut[3]^1)))
		vpatch(t, root, ps, offs+8, binary.BigEndian.AppendUint32(nil, uint32(us[2]+1)))
	})
	kT, kS := fmt.Sprintf("%s %s@%d", CodeCQBadUnit, pt, offt), fmt.Sprintf("%s %s@%d", CodeCQBadUnit, ps, offs)
	got := expectOnly(t, res, map[string]bool{kT: true, kS: true})
	if f := got[kT]; f.Evidence["tags_code"] != "fail" || f.Evidence["size"] != "pass" || f.Expected != fmt.Sprintf("tags_code=%d", ut[3]) {
		t.Errorf("tags: %s", fmtFinding(f))
	}
	if f := got[kS]; f.Evidence["size"] != "fail" || f.Evidence["tags_code"] != "pass" || f.Expected != fmt.Sprintf("size=%d", us[2]) {
		t.Errorf("size: %s", fmtFinding(f))
	}
}

// TestVerifyCQFileDeleted: without TopicA/1's first file, the file and
// each of its 50 messages are reported missing where their units belong.
func TestVerifyCQFileDeleted(t *testing.T) {
	k := queueKey{"TopicA", 1}
	want := map[string]bool{}
	file, _ := unitPlace(k, 0)
	want[CodeCQMissing+" "+file+"@0"] = true // the file itself
	lost := 0
	for _, u := range dmgOracle(t)[k] {
		if u[0] < fixtureCQFileSize/rmq.CQUnitSize {
			p, off := unitPlace(k, u[0])
			if off != 0 {
				want[fmt.Sprintf("%s %s@%d", CodeCQMissing, p, off)] = true
			}
			lost++
		}
	}
	_, res := verifyDataset(t, dmgDS, func(root string) {
		if err := os.Remove(filepath.Join(root, filepath.FromSlash(file))); err != nil {
			t.Fatal(err)
		}
	})
	expectOnly(t, res, want)
	n := 0
	for _, f := range findCode(res, CodeCQMissing) {
		if f.Details["state"] == "lost" && f.Severity == scan.Error {
			n++
		}
	}
	if n != lost || lost != 50 {
		t.Errorf("%d lost-message findings, oracle has %d units in the deleted file", n, lost)
	}
}

// TestVerifyIndexTruncated: a cut index file is a bad-header at the cut.
func TestVerifyIndexTruncated(t *testing.T) {
	var rel string
	_, res := verifyDataset(t, dmgDS, func(root string) {
		rel = indexFiles(t, root)[1]
		if err := os.Truncate(filepath.Join(root, filepath.FromSlash(rel)), 5000); err != nil {
			t.Fatal(err)
		}
	})
	var size *scan.Finding
	for _, f := range warnings(res) {
		if f.Path != rel || (f.Code != CodeIndexBadHeader && f.Code != CodeIndexBadChain) {
			t.Errorf("unexpected %s", fmtFinding(f))
		}
		if f.Code == CodeIndexBadHeader && f.Evidence["file_size"] == "fail" {
			size = &f
		}
	}
	if size == nil || size.Offset != 5000 || size.Expected != fmtInt(fixtureIndex.Size()) || size.Repair != scan.RepairRebuildIndex {
		t.Fatalf("size finding: %v", size)
	}
}

// TestVerifyIndexEntryMoved: an entry whose phy offset moved by one byte
// is a bad-entry at that entry, and nothing else is reported.
func TestVerifyIndexEntryMoved(t *testing.T) {
	var rel string
	const n = 5
	off := fixtureIndex.EntryOffset(n)
	_, res := verifyDataset(t, dmgDS, func(root string) {
		rel = indexFiles(t, root)[0]
		phy := binary.BigEndian.Uint64(readAt(t, root, rel, off+4, 8))
		vpatch(t, root, rel, off+4, binary.BigEndian.AppendUint64(nil, phy+1))
	})
	f := expectOnly(t, res, map[string]bool{fmt.Sprintf("%s %s@%d", CodeIndexBadEntry, rel, off): true})
	for _, x := range f {
		if x.Evidence["record_start"] != "fail" || x.Details["entry"] != int64(n) {
			t.Errorf("%s %v", fmtFinding(x), x.Details)
		}
	}
}

// TestVerifyIndexChain: an entry's prev pointer bent to a later entry
// breaks the chain (not decreasing) and strands its old predecessor.
func TestVerifyIndexChain(t *testing.T) {
	var rel string
	const n = 300
	off := fixtureIndex.EntryOffset(n)
	var oldPrev uint32
	_, res := verifyDataset(t, dmgDS, func(root string) {
		rel = indexFiles(t, root)[0]
		oldPrev = binary.BigEndian.Uint32(readAt(t, root, rel, off+16, 4))
		vpatch(t, root, rel, off+16, binary.BigEndian.AppendUint32(nil, n+1))
	})
	if oldPrev == 0 {
		t.Skip("entry has no predecessor in this fixture")
	}
	expectOnly(t, res, map[string]bool{
		fmt.Sprintf("%s %s@%d", CodeIndexBadChain, rel, off):                                      true,
		fmt.Sprintf("%s %s@%d", CodeIndexBadChain, rel, fixtureIndex.EntryOffset(int64(oldPrev))): true,
	})
}

// TestVerifyTopicsJSON: topics.json against the queue dirs.
func TestVerifyTopicsJSON(t *testing.T) {
	_, res := verifyDataset(t, dmgDS, func(root string) {
		js := `{"topicConfigTable":{"TopicA":{"topicName":"TopicA","readQueueNums":2,"writeQueueNums":2},
			"TopicC-v6":{"readQueueNums":1,"writeQueueNums":1},"TopicZ":{"readQueueNums":4,"writeQueueNums":4}}}`
		if err := os.MkdirAll(filepath.Join(root, "config"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, "config", "topics.json"), []byte(js), 0o644); err != nil {
			t.Fatal(err)
		}
	})
	want := map[string]bool{
		CodeTopicQueueRange + " consumequeue/TopicA@0":              true,
		CodeTopicUnknown + " consumequeue/TopicB@0":                 true,
		CodeTopicUnknown + " consumequeue/" + longTopic(res) + "@0": true,
	}
	expectOnly(t, res, want)
	if len(findCode(res, CodeTopicNoQueueDir)) != 1 {
		t.Errorf("TopicZ not reported")
	}
}

func longTopic(res *scan.Result) string {
	for _, f := range findCode(res, CodeTopicUnknown) {
		if len(f.Path) > 100 {
			return f.Path[len("consumequeue/"):]
		}
	}
	return "?"
}
