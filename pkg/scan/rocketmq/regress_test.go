package rocketmq

import (
	"context"
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"

	"github.com/storectl/storectl/internal/testutil"
	rmq "github.com/storectl/storectl/pkg/format/rocketmq"
	"github.com/storectl/storectl/pkg/scan"
)

// TestQueueOffsetAndTimestampRegress rewrites header fields that neither
// CRC covers (QUEUEOFFSET at 20, STORETIMESTAMP at 56 for an IPv4 born
// host) in a real 5.3.3 record, and expects exactly one finding of each
// kind at that record's offset.
func TestQueueOffsetAndTimestampRegress(t *testing.T) {
	dir := filepath.Join(testutil.Untar(t, testutil.Testdata("rocketmq", "rmq533-a-clean.tar.gz")), "store")
	file := filepath.Join(dir, "commitlog", "00000000000000000000")
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	// Walk file 0 and pick two dispatched IPv4 records of the same queue
	// with queue offsets > 0, the second well after the first.
	type rec struct {
		pos  int64
		qoff int64
		ts   int64
	}
	byQueue := map[string][]rec{}
	var order []string
	for pos := int64(0); pos < int64(len(b)); {
		m, err := rmq.DecodeMessage(b[pos:], pos, rmq.DefaultMaxRecordSize)
		if err != nil || m.IsBlank() {
			break
		}
		if !m.BornHostV6() && m.Dispatched() {
			k := string(m.Topic) + "/" + string(rune('0'+m.QueueID))
			if _, ok := byQueue[k]; !ok {
				order = append(order, k)
			}
			byQueue[k] = append(byQueue[k], rec{pos, m.QueueOffset, m.StoreTimestamp})
		}
		pos += int64(m.TotalSize)
	}
	var victim rec
	for _, k := range order {
		if rs := byQueue[k]; len(rs) >= 3 {
			victim = rs[2]
			break
		}
	}
	if victim.pos == 0 {
		t.Fatal("no queue with 3 IPv4 records in file 0")
	}
	binary.BigEndian.PutUint64(b[victim.pos+20:], 0)                           // queue offset back to 0
	binary.BigEndian.PutUint64(b[victim.pos+56:], uint64(victim.ts-3_600_000)) // one hour earlier
	if err := os.WriteFile(file, b, 0o644); err != nil {
		t.Fatal(err)
	}
	res, err := ScanCommitLog(context.Background(), Config{Root: dir}, scan.Options{})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][]int64{}
	for _, f := range res.Findings {
		if f.Severity >= scan.Warning {
			got[f.Code] = append(got[f.Code], f.Offset)
		}
	}
	if len(got) != 2 || len(got[CodeQueueRegress]) != 1 || got[CodeQueueRegress][0] != victim.pos ||
		len(got[CodeTimestampRegress]) != 1 || got[CodeTimestampRegress][0] != victim.pos {
		t.Fatalf("findings %v, want one %s and one %s at %d", got, CodeQueueRegress, CodeTimestampRegress, victim.pos)
	}
	// Both fields are outside the body CRC: the record itself still passes,
	// so the recovery end is that of the untouched fixture.
	pristine := filepath.Join(testutil.Untar(t, testutil.Testdata("rocketmq", "rmq533-a-clean.tar.gz")), "store")
	ref, err := ScanCommitLog(context.Background(), Config{Root: pristine}, scan.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if *res.RecoveryEnd != *ref.RecoveryEnd {
		t.Fatalf("recovery end %d, untouched %d", *res.RecoveryEnd, *ref.RecoveryEnd)
	}
}
