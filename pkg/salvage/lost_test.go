package salvage

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"testing"

	"github.com/storectl/storectl/internal/testutil"
	rmq "github.com/storectl/storectl/pkg/format/rocketmq"
	rmqscan "github.com/storectl/storectl/pkg/scan/rocketmq"
)

type unitKey struct {
	topic string
	qid   int32
	qoff  int64
	phy   int64
}

// droppedByRecovery is what the real broker's recovery dropped: the
// consume queue units in the fixture's files (decoded here) that are not
// among the entries the broker had after loading (recover.jsonl).
func droppedByRecovery(t *testing.T, name, store string) map[unitKey]bool {
	t.Helper()
	after := map[unitKey]bool{}
	f, err := os.Open(testutil.Testdata("rocketmq", name+".recover.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		var r struct {
			Kind, Phase, Topic string
			QueueID            int32     `json:"queue_id"`
			Entries            [][]int64 `json:"entries"`
		}
		if json.Unmarshal(sc.Bytes(), &r) != nil || r.Kind != "consume_queue" || r.Phase != "after_load" {
			continue
		}
		for _, e := range r.Entries {
			after[unitKey{r.Topic, r.QueueID, e[0], e[1]}] = true
		}
	}
	out := map[unitKey]bool{}
	dirs, _ := filepath.Glob(filepath.Join(store, "consumequeue", "*", "*"))
	for _, d := range dirs {
		qid, _ := strconv.Atoi(filepath.Base(d))
		files, _ := filepath.Glob(filepath.Join(d, "*"))
		sort.Strings(files)
		for _, p := range files {
			base, _ := strconv.ParseInt(filepath.Base(p), 10, 64)
			b, _ := os.ReadFile(p)
			for off := 0; off+20 <= len(b); off += 20 {
				u, _ := rmq.DecodeCQUnit(b[off:off+20], int64(off))
				if u.IsZero() || !u.Valid() {
					continue
				}
				k := unitKey{filepath.Base(filepath.Dir(d)), int32(qid), (base + int64(off)) / 20, u.CommitLogOffset}
				if !after[k] {
					out[k] = true
				}
			}
		}
	}
	return out
}

// TestRocketMQLost: --select lost on RocketMQ is the consume queue units
// the real broker's recovery dropped (recover.jsonl of the fixture):
// exported when their record is there, listed missing when it is not
// (d-torn-crc: the unit of the torn last message); none on the stale and
// clean stores. at-risk and unreferenced are refused.
func TestRocketMQLost(t *testing.T) {
	total := 0
	for _, name := range []string{"rmq533-d-torn-crc", "rmq533-c-stale", "rmq533-b-abnormal", "rmq533-a-clean"} {
		store := filepath.Join(testutil.Untar(t, testutil.Testdata("rocketmq", name+".tar.gz")), "store")
		want := droppedByRecovery(t, name, store)
		w, err := Create(filepath.Join(t.TempDir(), "out"), store)
		if err != nil {
			t.Fatal(err)
		}
		rep, err := ExportRocketMQ(context.Background(), rmqscan.Config{Root: store, CommitLogDir: filepath.Join(store, "commitlog")}, Options{Select: []Selection{SelectLost}}, w)
		if err != nil {
			t.Fatal(err)
		}
		w.Close()
		got := map[unitKey]bool{}
		msgs, err := w.Messages()
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range msgs {
			got[unitKey{m.Topic, *m.QueueID, *m.QueueOffset, *m.PhyOffset}] = true
		}
		for _, m := range rep.Missing {
			got[unitKey{m.Topic, *m.QueueID, *m.QueueOffset, *m.PhyOffset}] = true
		}
		if len(got) != len(want) {
			t.Errorf("%s: lost %v, the broker dropped %v", name, got, want)
		}
		for k := range want {
			if !got[k] {
				t.Errorf("%s: the broker dropped %+v, lost does not have it", name, k)
			}
		}
		total += len(want)
	}
	if total == 0 {
		t.Fatal("no fixture has a unit the recovery drops")
	}
	for _, s := range []Selection{SelectAtRisk, SelectUnreferenced} {
		if err := Supported(StoreRocketMQ, []Selection{s}); !errors.Is(err, ErrUnsupported) {
			t.Errorf("%s on RocketMQ: %v", s, err)
		}
	}
}
