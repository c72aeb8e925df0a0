package rocketmq

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/storectl/storectl/internal/testutil"
	"github.com/storectl/storectl/pkg/scan"
)

var datasets = []string{
	"rmq497-a-clean", "rmq497-c-stale", "rmq533-a-clean", "rmq533-b-abnormal",
	"rmq533-c-stale", "rmq533-d-torn-crc", "rmq533-e-propcrc-clean",
}

type injectInfo struct {
	Mode             string  `json:"mode"`
	File             string  `json:"file"`
	WritePos         int64   `json:"write_pos"`
	CopiedStoredPhy  []int64 `json:"copied_stored_phy_offsets"`
	LastMsgPhyOffset int64   `json:"last_msg_phy_offset"`
	FlippedPhyOffset int64   `json:"flipped_phy_offset"`
	StaleRegionPhy   []int64 `json:"stale_region_phy"`
}

func readInject(t *testing.T, ds string) (injectInfo, bool) {
	b, err := os.ReadFile(testutil.Testdata("rocketmq", ds+".inject.json"))
	if os.IsNotExist(err) {
		return injectInfo{}, false
	}
	if err != nil {
		t.Fatal(err)
	}
	var in injectInfo
	if err := json.Unmarshal(b, &in); err != nil {
		t.Fatal(err)
	}
	return in, true
}

// TestDatasetsAgainstBroker compares every record storectl reports with
// the real broker's decode walk, field by field.
func TestDatasetsAgainstBroker(t *testing.T) {
	for _, ds := range datasets {
		t.Run(ds, func(t *testing.T) {
			t.Parallel()
			_, res, recs := scanDataset(t, ds)
			o := readOracle(t, ds+".decode.jsonl")
			inj, _ := readInject(t, ds)
			got := map[int64]Record{}
			for _, r := range recs {
				if _, dup := got[r.PhyOffset]; dup {
					t.Errorf("record at %d reported twice", r.PhyOffset)
				}
				got[r.PhyOffset] = r
			}
			compared, rejected, diffs := 0, 0, 0
			for _, m := range o.msgs {
				r, ok := got[m.PhyOffset]
				if !ok {
					// Deliberate: the broker's validator does not check the
					// stored PHYSICALOFFSET, storectl does (rocketmq #10017).
					// Only the injected stale copies may be rejected.
					if inj.Mode == "stale" && !m.StoredMatches && m.PhyOffset >= inj.StaleRegionPhy[0] && m.PhyOffset < inj.StaleRegionPhy[1] {
						rejected++
						continue
					}
					t.Errorf("missing record at phy %d (%s)", m.PhyOffset, m.Topic)
					continue
				}
				delete(got, m.PhyOffset)
				compared++
				for _, d := range compareRecord(t, r, m, o.cq) {
					diffs++
					t.Errorf("phy %d: %s", m.PhyOffset, d)
				}
			}
			for phy := range got {
				t.Errorf("extra record at phy %d not in the broker's walk", phy)
			}
			if inj.Mode == "stale" && rejected != len(inj.CopiedStoredPhy) {
				t.Errorf("rejected %d stale records, injected %d", rejected, len(inj.CopiedStoredPhy))
			}
			if compared == 0 {
				t.Fatal("nothing compared")
			}
			t.Logf("%s: %d records compared, %d field differences, %d rejected as stale, %d findings",
				ds, compared, diffs, rejected, len(res.Findings))
		})
	}
}

// TestCleanDatasets: clean and abnormally shut down stores have no
// warnings, and the recovery end is the real broker's max offset.
func TestCleanDatasets(t *testing.T) {
	for _, ds := range []string{"rmq497-a-clean", "rmq533-a-clean", "rmq533-b-abnormal", "rmq533-e-propcrc-clean"} {
		t.Run(ds, func(t *testing.T) {
			t.Parallel()
			_, res, _ := scanDataset(t, ds)
			for _, f := range warnings(res) {
				t.Errorf("unexpected finding: %+v", f)
			}
			want := recoverMax(t, ds+".recover.jsonl")
			if res.RecoveryEnd == nil || *res.RecoveryEnd != want {
				t.Errorf("RecoveryEnd = %v, broker recovered to %d", res.RecoveryEnd, want)
			}
			last := res.Files[len(res.Files)-1]
			if last.End != scan.EndZero {
				t.Errorf("last file end = %q, want zero", last.End)
			}
			for _, f := range res.Files[:3] {
				if f.End != scan.EndBlank {
					t.Errorf("%s end = %q, want blank", f.Path, f.End)
				}
			}
		})
	}
}

// TestStaleDatasets: exactly the injected records are stale-record
// findings, and the recovery end is that of the fixed broker recovery.
func TestStaleDatasets(t *testing.T) {
	for _, ds := range []string{"rmq497-c-stale", "rmq533-c-stale"} {
		t.Run(ds, func(t *testing.T) {
			t.Parallel()
			_, res, _ := scanDataset(t, ds)
			inj, _ := readInject(t, ds)
			want := map[int64]bool{}
			for _, p := range inj.CopiedStoredPhy {
				want[inj.WritePos+p] = true // copied contiguously from offset 0 of file 0
			}
			n := 0
			for _, f := range res.Findings {
				switch {
				case f.Code == CodeStaleRecord:
					n++
					if f.Path != "commitlog/"+inj.File || !want[f.Offset] || f.Severity != scan.Error || f.Repair != scan.RepairTruncate {
						t.Errorf("unexpected stale finding %+v", f)
					}
					delete(want, f.Offset)
				case f.Severity >= scan.Warning:
					t.Errorf("unexpected finding %+v", f)
				}
			}
			if n != 13 || len(want) != 0 {
				t.Errorf("%d stale findings; not reported: %v", n, want)
			}
			fixed := recoverMax(t, ds+".fixed-recovery.recover.jsonl")
			if res.RecoveryEnd == nil || *res.RecoveryEnd != fixed {
				t.Errorf("RecoveryEnd = %v, fixed recovery max %d", res.RecoveryEnd, fixed)
			}
			if buggy := recoverMax(t, ds+".recover.jsonl"); buggy == fixed {
				t.Errorf("oracle: the unpatched broker should accept the stale records")
			}
		})
	}
}

// TestTornCRCDataset: a body-CRC finding at the last message and the
// broker's recovery end.
func TestTornCRCDataset(t *testing.T) {
	ds := "rmq533-d-torn-crc"
	_, res, _ := scanDataset(t, ds)
	inj, _ := readInject(t, ds)
	want := recoverMax(t, ds+".recover.jsonl")
	if res.RecoveryEnd == nil || *res.RecoveryEnd != want || want != inj.LastMsgPhyOffset {
		t.Fatalf("RecoveryEnd = %v, broker %d, last message %d", res.RecoveryEnd, want, inj.LastMsgPhyOffset)
	}
	var found []scan.Finding
	for _, f := range warnings(res) {
		found = append(found, f)
	}
	if len(found) != 1 {
		t.Fatalf("findings: %+v", found)
	}
	f := found[0]
	base := int64(786432)
	if f.Code != CodeBodyCRC || f.Path != "commitlog/"+inj.File || f.Offset+base != inj.LastMsgPhyOffset ||
		f.Evidence["body_crc"] != "fail" || f.Evidence["phy_offset"] != "pass" || f.Repair != scan.RepairTruncate {
		t.Fatalf("finding = %+v", f)
	}
	if !strings.HasPrefix(f.Path, "commitlog/") || res.Files[3].End != scan.EndTorn {
		t.Errorf("end = %q", res.Files[3].End)
	}
}
