package rocketmq

import (
	"encoding/binary"
	"reflect"
	"testing"
)

// TestVerifyMergedWalkSameAsPerQueue: the consume queue walk merged over
// all queues gives the findings of a walk one queue at a time (the order
// the checks were written for), on a store with a bad unit.
func TestVerifyMergedWalkSameAsPerQueue(t *testing.T) {
	k := queueKey{"TopicA", 0}
	u := dmgOracle(t)[k][3]
	p, off := unitPlace(k, u[0])
	root, merged := verifyDataset(t, dmgDS, func(root string) {
		vpatch(t, root, p, off, binary.BigEndian.AppendUint64(nil, uint64(u[1]+10)))
	})
	if len(findCode(merged, CodeCQBadUnit)) == 0 {
		t.Fatal("the damaged unit was not reported")
	}
	t.Logf("%v queues, %d findings", merged.Layout["cq_queues"], len(merged.Findings))
	defer func(n int) { cqMergeQueues = n }(cqMergeQueues)
	cqMergeQueues = 1
	single := verifyRoot(t, root, VerifyConfig{Config: Config{Root: root}})
	if !reflect.DeepEqual(merged.Findings, single.Findings) {
		t.Errorf("merged walk: %d findings, per-queue walk: %d; they differ", len(merged.Findings), len(single.Findings))
		for i := range min(len(merged.Findings), len(single.Findings)) {
			if !reflect.DeepEqual(merged.Findings[i], single.Findings[i]) {
				t.Errorf("first difference: %s vs %s", fmtFinding(merged.Findings[i]), fmtFinding(single.Findings[i]))
				break
			}
		}
	}
}
