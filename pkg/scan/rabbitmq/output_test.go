package rabbitmq

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"testing"

	gen "github.com/storectl/storectl/internal/gen/rabbitmq"
	"github.com/storectl/storectl/pkg/scan"
)

// TestRecordsListEveryVictim: a hazard finding names at most
// InlineVictims victims, and the record lines (--records) carry the whole
// of every victim list: on a generated store whose zero holes make every
// file's generation-1 scanner stop early (hundreds of victims a file),
// the lost_by of Scan's record lines are exactly the victim lists the
// per-file callback is handed, each finding's victim_count, inline victims, last victim
// and offsets agree with them, and with long lists spilled too.
func TestRecordsListEveryVictim(t *testing.T) {
	root := t.TempDir()
	sum, err := gen.Generate(root, gen.Config{Seed: 3, Kind: gen.BasicMessage, TotalBytes: 4 << 20,
		FileLimit: 1 << 20, HoleEvery: 50, UnrefEvery: 20})
	if err != nil {
		t.Fatal(err)
	}
	key := func(path string, off int64, code string, at int64) string {
		return fmt.Sprintf("%s@%d %s@%d", path, off, code, at)
	}
	// The victim lists as the scan hands them over.
	v := scanKeep(t, root, sum.VHostDir, VHostOptions{})
	want := map[string]bool{}
	lists := map[string]Victims{} // path code@offset -> victims
	for _, f := range v.Files {
		for _, h := range f.Hazards {
			lists[fmt.Sprintf("%s %s@%d", f.Path, h.Code, h.Offset)] = h.Victims
			for _, vic := range h.Victims {
				want[key(f.Path, vic.Offset, h.Code, h.Offset)] = true
			}
		}
	}
	longest := 0
	for _, vs := range lists {
		longest = max(longest, len(vs))
	}
	if longest < 10*InlineVictims {
		t.Fatalf("longest victim list %d: the store does not test the cap", longest)
	}
	for _, spill := range []bool{false, true} {
		t.Run(fmt.Sprint("spill=", spill), func(t *testing.T) {
			if spill {
				defer spillAll()()
			}
			got := map[string]bool{}
			opts := scan.Options{Jobs: 2, Records: func(r any) error {
				rj := r.(RecordJSON)
				for _, l := range rj.LostBy {
					got[key(rj.Path, rj.Offset, l.Code, l.Offset)] = true
				}
				return nil
			}}
			res, err := Scan(context.Background(), Config{Root: root, VHostDirs: []string{sum.VHostDir}}, opts)
			if err != nil {
				t.Fatal(err)
			}
			if !maps.Equal(got, want) {
				t.Errorf("records' lost_by: %d pairs, the victim lists %d", len(got), len(want))
			}
			seen := 0
			for _, f := range res.Findings {
				vs, ok := lists[fmt.Sprintf("%s %s@%d", f.Path, f.Code, f.Offset)]
				if !ok {
					continue
				}
				seen++
				head := vs[:min(len(vs), InlineVictims)]
				inline, _ := f.Details["victims"].(Victims)
				if f.Details["victim_count"] != len(vs) || !slices.Equal(inline, head) ||
					f.Details["victims_first_offset"] != vs[0].Offset || f.Details["victims_last_offset"] != vs[len(vs)-1].Offset {
					t.Errorf("%s %s@%d: details %v, %d victims", f.Path, f.Code, f.Offset, f.Details, len(vs))
				}
				if last, ok := f.Details["last_victim"]; (len(vs) > InlineVictims) != ok || (ok && last != vs[len(vs)-1]) {
					t.Errorf("%s %s@%d: last_victim %v of %d", f.Path, f.Code, f.Offset, last, len(vs))
				}
			}
			if seen != len(lists) {
				t.Errorf("%d hazard findings, %d hazards", seen, len(lists))
			}
			t.Logf("%d hazards, %d victims (the longest list %d), all in the record lines", len(lists), len(want), longest)
		})
	}
}

// TestQueueLinesNameFewIDs: a queue line names at most InlineQueueIDs
// ids a list, the first ones, and its counts are the whole: on the
// generated store whose generation-1 stops put most messages at risk,
// each queue's at_risk[k] is the number of record lines (verify
// --records) that queue references with a lost_by of a hazard of range
// k, of which at_risk_msg_ids[k] names InlineQueueIDs at most.
func TestQueueLinesNameFewIDs(t *testing.T) {
	root := t.TempDir()
	sum, err := gen.Generate(root, gen.Config{Seed: 3, Kind: gen.BasicMessage, TotalBytes: 4 << 20,
		FileLimit: 1 << 20, HoleEvery: 50, UnrefEvery: 20})
	if err != nil {
		t.Fatal(err)
	}
	{
		count := map[string]int{} // queue key -> records
		opts := scan.Options{Jobs: 2, Records: func(r any) error {
			rj := r.(RecordJSON)
			if rj.Status != StatusReferenced {
				return nil
			}
			keys := map[string]bool{}
			for _, l := range rj.LostBy {
				keys[atRiskKey(l.Code)] = true
			}
			for _, q := range rj.ReferencedBy {
				for k := range keys {
					count[q+" "+k]++
				}
			}
			return nil
		}}
		res, err := Verify(context.Background(), Config{Root: root, VHostDirs: []string{sum.VHostDir}}, opts)
		if err != nil {
			t.Fatal(err)
		}
		long := 0
		for _, q := range res.Queues {
			for _, k := range atRiskKeys {
				n, ids := q.AtRisk[k], q.AtRiskMsgIDs[k]
				if n != count[q.Queue+" "+k] || ids.Len() != min(n, InlineQueueIDs) {
					t.Errorf("queue %s %s: at_risk %d, %d ids named, %d record lines", q.Queue, k, n, ids.Len(), count[q.Queue+" "+k])
				}
				if n > InlineQueueIDs {
					long++
				}
			}
			if q.DropMsgIDs.Len() != min(q.Drop, InlineQueueIDs) {
				t.Errorf("queue %s: drop %d, %d ids named", q.Queue, q.Drop, q.DropMsgIDs.Len())
			}
		}
		if long == 0 || len(res.Queues) == 0 {
			t.Fatalf("%d queues, no at-risk list longer than %d: nothing capped", len(res.Queues), InlineQueueIDs)
		}
		t.Logf("%d queues, %d at-risk lists capped", len(res.Queues), long)
	}
}
