package rabbitmq

import (
	"encoding/hex"
	"path/filepath"
	"reflect"
	"runtime"
	"testing"

	rfmt "github.com/storectl/storectl/pkg/format/rabbitmq"
)

// TestSegmentsReuseScratch: a queue dir read a segment at a time (verify
// reads each dir two or three times) decodes every segment into its dir's
// recycled scratch (dirScratch: the .qi bytes, the records, the entries
// handed over), not into new buffers per segment. On genBigQueue's three
// segments, intact and with segment 1's header damaged (its entries
// dropped, the slice it would have filled kept for segment 2): the entries
// handed over are ReadQueueDir's, the calls after the first get the first
// call's array, and a read of the dir allocates far less than one
// segment's buffers (0.7 MB of entries, 128 KiB of .qi, 0.8 MB of
// records).
func TestSegmentsReuseScratch(t *testing.T) {
	for _, damage := range []bool{false, true} {
		name := "intact"
		if damage {
			name = "bad-header"
		}
		t.Run(name, func(t *testing.T) {
			_, sum := genBigQueue(t)
			dir := filepath.Join(sum.VHostDir, "queues", rfmt.QueueDirName("/", "big"))
			if damage {
				qi := filepath.Join(dir, "1.qi")
				b := readFile(t, qi)
				b[0] ^= 0xff
				writeFile(t, qi, b)
			}
			want, err := ReadQueueDir(dir, rfmt.LegacySegmentEntryCount)
			if err != nil {
				t.Fatal(err)
			}
			var got []QueueEntry
			var arrays []*QueueEntry
			q, err := ReadQueueDirSegmentsIDs(dir, rfmt.LegacySegmentEntryCount, func(_ *QueueDir, es []QueueEntry) error {
				if len(es) > 0 {
					arrays = append(arrays, &es[:1][0])
				}
				for _, e := range es {
					if e.HasID {
						e.MsgID = hex.EncodeToString(e.ID[:])
					}
					got = append(got, e)
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want.Entries) || !reflect.DeepEqual(q.Anomalies, want.Anomalies) {
				t.Fatalf("%d entries, %d anomalies handed over; ReadQueueDir: %d, %d", len(got), len(q.Anomalies), len(want.Entries), len(want.Anomalies))
			}
			if damage != (len(q.Anomalies) > 0) {
				t.Fatalf("anomalies %v (damaged: %v)", q.Anomalies, damage)
			}
			segs := 3
			if damage {
				segs = 2
			}
			if len(arrays) != segs {
				t.Fatalf("%d segments with entries handed over, want %d", len(arrays), segs)
			}
			for i, a := range arrays[1:] {
				if a != arrays[0] {
					t.Errorf("segment call %d got a new array", i+1)
				}
			}
			least := ^uint64(0)
			for range 5 {
				var before, after runtime.MemStats
				runtime.ReadMemStats(&before)
				if _, err := ReadQueueDirSegmentsIDs(dir, rfmt.LegacySegmentEntryCount, func(*QueueDir, []QueueEntry) error { return nil }); err != nil {
					t.Fatal(err)
				}
				runtime.ReadMemStats(&after)
				least = min(least, after.TotalAlloc-before.TotalAlloc)
			}
			t.Logf("%d entries, %d bytes allocated by the least of 5 reads", len(got), least)
			if least > 256<<10 {
				t.Errorf("a read of the dir allocated %d bytes, want under 256 KiB", least)
			}
		})
	}
}
