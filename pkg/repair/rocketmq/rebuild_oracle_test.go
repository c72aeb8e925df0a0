package rocketmq

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/storectl/storectl/internal/testutil"
	rmq "github.com/storectl/storectl/pkg/format/rocketmq"
	"github.com/storectl/storectl/pkg/scan"
)

var scanNoRecords = scan.Options{}

// recoverOracle is what the broker's own recovery kept (recover.jsonl,
// phase after_start_reput).
type recoverOracle struct {
	maxPhy int64
	queues map[string][]rmq.CQUnit // "topic/queueId" -> units from queue offset 0
}

func readRecoverOracle(t *testing.T, name string) recoverOracle {
	t.Helper()
	f, err := os.Open(testutil.Testdata("rocketmq", name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	o := recoverOracle{queues: map[string][]rmq.CQUnit{}}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var l struct {
			Kind    string    `json:"kind"`
			Phase   string    `json:"phase"`
			MaxPhy  int64     `json:"max_phy_offset"`
			Topic   string    `json:"topic"`
			QueueID int32     `json:"queue_id"`
			Entries [][]int64 `json:"entries"`
		}
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatal(err)
		}
		if l.Phase != "after_start_reput" {
			continue
		}
		switch l.Kind {
		case "commitlog":
			o.maxPhy = l.MaxPhy
		case "consume_queue":
			var us []rmq.CQUnit
			for i, e := range l.Entries {
				if len(e) != 4 || e[0] != int64(i) {
					t.Fatalf("%s: odd entry %v", name, e)
				}
				us = append(us, rmq.CQUnit{CommitLogOffset: e[1], Size: int32(e[2]), TagsCode: e[3]})
			}
			o.queues[fmt.Sprintf("%s/%d", l.Topic, l.QueueID)] = us
		}
	}
	if err := sc.Err(); err != nil || o.maxPhy == 0 || len(o.queues) == 0 {
		t.Fatalf("%s: %v (max %d, %d queues)", name, err, o.maxPhy, len(o.queues))
	}
	return o
}

// readQueue reads a queue's units from offset 0 up to the first zero unit.
func readQueue(t *testing.T, store, key string, fileSize int64) []rmq.CQUnit {
	t.Helper()
	var out []rmq.CQUnit
	for base := int64(0); ; base += fileSize {
		b, err := os.ReadFile(filepath.Join(store, "consumequeue", filepath.FromSlash(key), rmq.FormatFileName(base)))
		if err != nil {
			return out
		}
		for _, u := range rbUnits(b) {
			if u.IsZero() {
				return out
			}
			out = append(out, u)
		}
	}
}
