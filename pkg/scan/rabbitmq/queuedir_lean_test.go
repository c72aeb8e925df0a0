package rabbitmq

import (
	"encoding/hex"
	"os"
	"path/filepath"
	"reflect"
	"sync"
	"testing"

	rfmt "github.com/storectl/storectl/pkg/format/rabbitmq"
)

// refsByDir reads vdir with ReadVHostQueuesRefsFunc and returns, per
// queue dir, the references handed over (copied: take must not keep them).
func refsByDir(t *testing.T, vdir string) (map[string][]QueueRef, *VHostQueues) {
	t.Helper()
	var mu sync.Mutex
	got := map[string][]QueueRef{}
	v, err := ReadVHostQueuesRefsFunc(vdir, func(q *QueueDir, refs []QueueRef) {
		mu.Lock()
		got[q.Dir] = append(got[q.Dir], refs...)
		mu.Unlock()
	})
	if err != nil {
		t.Fatal(err)
	}
	return got, v
}

// TestRefsFuncRecycledSameAsKept: on every queue dir of the six
// real-broker datasets, read three times in a row (the segment buffers and
// decode scratch are recycled between segments, dirs and reads, and dirs
// are read in parallel), the references ReadVHostQueuesRefsFunc hands
// over are exactly the Refs ReadVHostQueuesRefs keeps, with the same
// anomalies.
func TestRefsFuncRecycledSameAsKept(t *testing.T) {
	dirs, refs := 0, 0
	for _, ds := range qxDatasets {
		vdir := qxExtract(t, ds.tarball)
		want, err := ReadVHostQueuesRefs(vdir)
		if err != nil {
			t.Fatal(err)
		}
		for _, wq := range want.Queues {
			for _, r := range wq.Refs {
				if r.MsgID != "" { // v1 (.idx, journal) and v2 alike: the ids are in ID
					t.Fatalf("%s %s: reference %s@%d has a hex MsgID", ds.name, filepath.Base(wq.Dir), r.Path, r.SeqID)
				}
			}
		}
		for round := range 3 {
			got, v := refsByDir(t, vdir)
			for i, wq := range want.Queues {
				g := got[wq.Dir]
				if len(g) != len(wq.Refs) || (len(g) > 0 && !reflect.DeepEqual(g, wq.Refs)) {
					t.Errorf("%s round %d %s: %d references handed over, %d kept (or they differ)",
						ds.name, round, filepath.Base(wq.Dir), len(g), len(wq.Refs))
				}
				if !reflect.DeepEqual(v.Queues[i].Anomalies, wq.Anomalies) {
					t.Errorf("%s round %d %s: anomalies %v, want %v", ds.name, round, filepath.Base(wq.Dir),
						v.Queues[i].Anomalies, wq.Anomalies)
				}
				if round == 0 {
					dirs++
					refs += len(g)
				}
			}
		}
	}
	if dirs == 0 || refs == 0 {
		t.Fatalf("%d queue dirs, %d references compared", dirs, refs)
	}
	t.Logf("%d queue dirs, %d references, each read 3 times", dirs, refs)
}

// TestSegmentsIDsSameAsHex: on every queue dir of the six real-broker
// datasets, ReadQueueDirSegmentsIDs hands over ReadQueueDirSegments'
// entries with the index ids as bytes only: where HasID is set, ID is the
// bytes of the other's MsgID and MsgID is empty; every other field, and
// the anomalies, are the same. Entries with HasID are counted so the test
// cannot pass on queues without shared-store ids.
func TestSegmentsIDsSameAsHex(t *testing.T) {
	withIDs := 0
	for _, ds := range qxDatasets {
		vdir := qxExtract(t, ds.tarball)
		ents, err := os.ReadDir(filepath.Join(vdir, "queues"))
		if err != nil {
			t.Fatal(err)
		}
		for _, de := range ents {
			dir := filepath.Join(vdir, "queues", de.Name())
			want, _, wq, werr := segmentsOf(t, dir, rfmt.LegacySegmentEntryCount)
			var got []QueueEntry
			gq, gerr := ReadQueueDirSegmentsIDs(dir, rfmt.LegacySegmentEntryCount, func(_ *QueueDir, es []QueueEntry) error {
				got = append(got, es...)
				return nil
			})
			if (werr == nil) != (gerr == nil) || len(got) != len(want) {
				t.Fatalf("%s %s: %d entries (%v), want %d (%v)", ds.name, de.Name(), len(got), gerr, len(want), werr)
			}
			for i := range got {
				g, w := got[i], want[i]
				if g.HasID != w.HasID || g.ID != w.ID {
					t.Fatalf("%s %s entry %d: ID %x/%v, want %x/%v", ds.name, de.Name(), i, g.ID, g.HasID, w.ID, w.HasID)
				}
				if g.HasID {
					withIDs++
					if g.MsgID != "" || w.MsgID != hex.EncodeToString(w.ID[:]) {
						t.Fatalf("%s %s entry %d: MsgID %q, other reader %q, ID %x", ds.name, de.Name(), i, g.MsgID, w.MsgID, w.ID)
					}
					g.MsgID = w.MsgID
				}
				if !reflect.DeepEqual(g, w) {
					t.Fatalf("%s %s entry %d: %+v, want %+v", ds.name, de.Name(), i, g, w)
				}
			}
			if werr == nil && !reflect.DeepEqual(gq.Anomalies, wq.Anomalies) {
				t.Errorf("%s %s: anomalies differ", ds.name, de.Name())
			}
		}
	}
	if withIDs == 0 {
		t.Fatal("no entry with an index id")
	}
	t.Logf("%d entries with index ids compared", withIDs)
}
