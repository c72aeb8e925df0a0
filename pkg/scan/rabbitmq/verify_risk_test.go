package rabbitmq

import (
	"encoding/hex"
	"fmt"
	"sort"
	"strings"
	"testing"

	rfmt "github.com/storectl/storectl/pkg/format/rabbitmq"
)

// modelLost returns the ids of the records at offs that a scanner model's
// output does not hold at the same offset and size.
func modelLost(b []byte, offs []int64, got []rfmt.ScanRecord) []string {
	seen := map[int64]int64{}
	for _, r := range got {
		seen[r.Offset] = r.TotalSize
	}
	var out []string
	for _, o := range offs {
		size := int64(b[o+7]) | int64(b[o+6])<<8 | int64(b[o+5])<<16 // records here are < 16 MiB
		if seen[o] != size+9 {
			out = append(out, hex.EncodeToString(b[o+8:o+24]))
		}
	}
	sort.Strings(out)
	return out
}

// TestVerifyAtRisk builds misread vhosts as TestMisreadCorpus does (real
// 3.10 records, a 5-byte zero hole before a referenced victim whose last
// id byte is 0xFF, all referenced by q1). q1's at_risk per version range
// must be exactly the referenced records the scanner models lose:
// rfmt.ScanData (generation 2) for 3.13.1-4.0.2, rfmt.ScanGen1 for
// 3.10.0-3.13.0; off-by-nine is 0. With the victim last, 3.13.1-4.0.2 is
// the victim alone. A generation-1 scanner stops at any zero window, so a
// record after a zero hole is always at risk for 3.10.0-3.13.0 too. With
// --broker-version the prediction drops what that version's dirty
// recovery loses.
func TestVerifyAtRisk(t *testing.T) {
	recs, plens := realRecords(t)
	a, c := recs[0], recs[1]
	vic := victim(t, recs[0], plens[0], 4116, 0, 0xFF, 1)
	vicID := hex.EncodeToString(vic[8:24])
	for _, k := range []struct {
		name  string
		parts []part
	}{
		{"victim-last", []part{{rec: a}, {rec: c}, {hole: 5}, {rec: vic, victim: true}}},
		// the generation-2 model accepts a second, cascaded bogus frame in
		// the victim's tail that swallows the next record's head
		{"victim-then-record", []part{{rec: a}, {hole: 5}, {rec: vic, victim: true}, {rec: c}}},
	} {
		root, vdir, b, offs := writeVHost(t, k.parts)
		g1, _ := rfmt.ScanGen1(b)
		lost1 := modelLost(b, offs, g1.Records)
		lost2 := modelLost(b, offs, rfmt.ScanData(b, rfmt.ScanOptions{}))
		vv := verifyDir(t, root, vdir, "")
		if len(vv.Queues) != 1 {
			t.Fatalf("%d queues", len(vv.Queues))
		}
		q := vv.Queues[0]
		got := func(key string) string { return fmt.Sprint(sortedCopy(q.AtRiskMsgIDs[key].Strings())) }
		if q.AtRisk[VersionsGen2] != len(lost2) || got(VersionsGen2) != fmt.Sprint(lost2) ||
			q.AtRisk[VersionsGen1] != len(lost1) || got(VersionsGen1) != fmt.Sprint(lost1) ||
			q.AtRisk[VersionsOffByNine] != 0 || q.Keep != len(offs) || vv.Layout["shutdown"].(map[string]any)["state"] != StateUnclean {
			t.Errorf("%s: at_risk %v %v, keep %d; models lose gen-1 %v, gen-2 %v", k.name, q.AtRisk, q.AtRiskMsgIDs, q.Keep, lost1, lost2)
		}
		if k.name == "victim-last" && (q.AtRisk[VersionsGen2] != 1 || got(VersionsGen2) != "["+vicID+"]") {
			t.Errorf("%s: at_risk %v, want the victim %s alone", k.name, q.AtRiskMsgIDs, vicID)
		}
		t.Logf("%s: q1 keep %d, at_risk %v (models: gen-1 %d, gen-2 %d)", k.name, q.Keep, q.AtRisk, len(lost1), len(lost2))

		for _, c := range []struct {
			ver  string
			lost []string
		}{{"3.13.7", lost2}, {"4.0.3", nil}, {"3.12.14", lost1}} {
			q := verifyDir(t, root, vdir, c.ver).Queues[0]
			if q.Keep != len(offs)-len(c.lost) || fmt.Sprint(sortedCopy(q.DropMsgIDs.Strings())) != fmt.Sprint(sortedCopy(c.lost)) {
				t.Errorf("%s --broker-version %s: keep %d drops %v, want %v lost", k.name, c.ver, q.Keep, q.DropMsgIDs, c.lost)
			}
			for _, ef := range entryFates(t, root, vdir, c.ver)[q.Dir] {
				if !ef.Keep && !strings.HasPrefix(ef.Reason, DropScanner) {
					t.Errorf("%s --broker-version %s: %s dropped for %q", k.name, c.ver, ef.MsgID, ef.Reason)
				}
			}
		}
	}
}
