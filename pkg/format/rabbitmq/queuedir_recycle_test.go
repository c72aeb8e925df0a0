package rabbitmq

import (
	"path/filepath"
	"reflect"
	"sync"
	"testing"
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
