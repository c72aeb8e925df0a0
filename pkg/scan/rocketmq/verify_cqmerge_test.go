package rocketmq

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	gen "github.com/storectl/storectl/internal/gen/rocketmq"
	rmq "github.com/storectl/storectl/pkg/format/rocketmq"
	"github.com/storectl/storectl/pkg/scan"
)

// TestVerifyMergedWalkSameAsPerQueue: the consume queue walk merged over
// all queues gives the findings of a walk one queue at a time (the order
// the checks were written for), on a store with a bad unit.
func TestVerifyMergedWalkSameAsPerQueue(t *testing.T) {
	root, merged, _, _ := verifyMidMessageUnit(t)
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

// TestVerifyUnitFarPastQueueEnd: a stray non-zero unit megabytes past a
// queue's last unit (beyond the cursor's buffer and several of the zero
// skipper's reads) is the one "unit after the queue's end" warning, at
// the offset it was written to; a zero tail alone reports nothing.
func TestVerifyUnitFarPastQueueEnd(t *testing.T) {
	root := t.TempDir()
	if _, err := gen.Generate(root, gen.Config{MappedFileSize: 1 << 20, TotalBytes: 1 << 20, Seed: 3}); err != nil {
		t.Fatal(err)
	}
	clean := verifyRoot(t, root, VerifyConfig{Config: Config{Root: root}})
	if w := warnings(clean); len(w) != 0 {
		t.Fatalf("generated store: %d warnings, first %s", len(w), fmtFinding(w[0]))
	}
	rel := "consumequeue/TopicB/1/" + rmq.FormatFileName(0)
	st, err := os.Stat(filepath.Join(root, rel))
	if err != nil {
		t.Fatal(err)
	}
	off := st.Size()/rmq.CQUnitSize*rmq.CQUnitSize - 7*rmq.CQUnitSize // near the file's end
	if off < 1<<20 {
		t.Fatalf("consume queue file of %d bytes: too small for the test", st.Size())
	}
	vpatch(t, root, rel, off, binary.BigEndian.AppendUint64(nil, 12345))
	res := verifyRoot(t, root, VerifyConfig{Config: Config{Root: root}})
	got := expectOnly(t, res, map[string]bool{fmt.Sprintf("%s %s@%d", CodeCQBadUnit, rel, off): true})
	for _, f := range got {
		if f.Severity != scan.Warning || f.Details["phy_offset"] != int64(12345) {
			t.Errorf("stray unit: %s %v", fmtFinding(f), f.Details)
		}
	}
}
