package rmqconfig

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/storectl/storectl/internal/testutil"
	rmq "github.com/storectl/storectl/pkg/format/rocketmq"
	"github.com/storectl/storectl/pkg/scan"
)

func t3WithD1(t *testing.T) string {
	store := filepath.Join(testutil.Untar(t, testutil.Testdata("rocketmq-5x", "rmq533-t3-cltrunc.tar.gz")), "store")
	b, err := os.ReadFile(testutil.Testdata("rocketmq-5x", "rmq533-d1-consumeroffset.consumerOffset.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(store, rmq.ConsumerOffsetFile), b, 0o644); err != nil {
		t.Fatal(err)
	}
	return store
}

// t3End is where the real 5.3.3 recovery truncated T3's commitlog.
const t3End = 130713

type expected struct {
	TopicGroup string `json:"topic_group"`
	QueueID    int32  `json:"queue_id"`
	Committed  int64  `json:"committed_offset"`
	Max        *int64 `json:"cq_max_after_truncation"`
	Above      bool   `json:"above_max"`
}

// TestD1OffsetsAboveMax: with D1's consumerOffset.json on the truncated T3
// store, every committed offset the dataset lists as above the max is
// reported, with the queue's max after the truncation.
func TestD1OffsetsAboveMax(t *testing.T) {
	store := t3WithD1(t)
	res, err := Scan(context.Background(), Config{Root: store, RecoveryEnd: t3End}, scan.Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := testutil.ReadJSONL[expected](t, testutil.Testdata("rocketmq-5x", "rmq533-d1-consumeroffset.expected.jsonl"))
	got := map[string]Offset{}
	for _, o := range res.Extra["config"].(*Summary).AboveMax {
		got[o.Key+"/"+string(rune('0'+o.QueueID))] = o
	}
	for _, w := range want {
		o, ok := got[w.TopicGroup+"/"+string(rune('0'+w.QueueID))]
		if ok != w.Above {
			t.Errorf("%s/%d: above %v, want %v", w.TopicGroup, w.QueueID, ok, w.Above)
			continue
		}
		wantMax := int64(0)
		if w.Max != nil {
			wantMax = *w.Max
		}
		if o.Committed != w.Committed || o.Max != wantMax {
			t.Errorf("%s/%d: committed %d max %d, want %d %d", w.TopicGroup, w.QueueID, o.Committed, o.Max, w.Committed, wantMax)
		}
	}
	n := 0
	for _, f := range res.Findings {
		if f.Code == CodeOffsetAbove && f.Path == rmq.ConsumerOffsetFile {
			n++
		}
	}
	if n != len(want) {
		t.Errorf("%d findings, want %d", n, len(want))
	}
	t.Logf("%d of %d committed offsets above their queue's max, as D1 lists them", n, len(want))
}

// TestTornWithBak: a torn consumerOffset.json with a good .bak is found at
// the byte where it stops parsing, and the offsets are read from the .bak.
func TestTornWithBak(t *testing.T) {
	store := t3WithD1(t)
	p := filepath.Join(store, rmq.ConsumerOffsetFile)
	b, _ := os.ReadFile(p)
	if err := os.WriteFile(p+rmq.BakSuffix, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, b[:200], 0o644); err != nil {
		t.Fatal(err)
	}
	res, err := Scan(context.Background(), Config{Root: store, RecoveryEnd: t3End}, scan.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var torn *scan.Finding
	for i, f := range res.Findings {
		if f.Code == CodeTorn {
			torn = &res.Findings[i]
		}
	}
	if torn == nil || torn.Path != rmq.ConsumerOffsetFile || torn.Offset != 200 || torn.Details["loaded_from"] != rmq.ConsumerOffsetFile+rmq.BakSuffix {
		t.Fatalf("torn finding: %+v", torn)
	}
	above := res.Extra["config"].(*Summary).AboveMax
	if len(above) != 9 || above[0].File != rmq.ConsumerOffsetFile+rmq.BakSuffix {
		t.Fatalf("offsets from the .bak: %+v", above)
	}
	// Both unusable: an error.
	if err := os.WriteFile(p+rmq.BakSuffix, b[:10], 0o644); err != nil {
		t.Fatal(err)
	}
	res, _ = Scan(context.Background(), Config{Root: store, RecoveryEnd: t3End}, scan.Options{})
	found := false
	for _, f := range res.Findings {
		found = found || f.Code == CodeBothBad && f.Severity == scan.Error
	}
	if !found {
		t.Fatalf("no %s: %+v", CodeBothBad, res.Findings)
	}
}
