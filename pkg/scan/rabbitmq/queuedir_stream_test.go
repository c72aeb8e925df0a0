package rabbitmq

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"testing"

	rfmt "github.com/storectl/storectl/pkg/format/rabbitmq"
)

// segmentsOf reads dir with ReadQueueDirSegments and returns the entries
// handed over, the number of calls and the QueueDir.
func segmentsOf(t *testing.T, dir string, segEntries int) ([]QueueEntry, int, *QueueDir, error) {
	t.Helper()
	var got []QueueEntry
	calls := 0
	q, err := ReadQueueDirSegments(dir, segEntries, func(q *QueueDir, es []QueueEntry) error {
		calls++
		got = append(got, es...)
		return nil
	})
	return got, calls, q, err
}

// TestQueueDirSegmentsSameAsWhole: on every queue dir of the six
// real-broker datasets (CQ v1 journals and segments, CQ v2 .qi/.qs, torn
// and crashed ones), the entries handed over segment by segment are
// exactly ReadQueueDir's Entries, in the same order, with the same
// anomalies; v2-only queues with several segments take several calls.
func TestQueueDirSegmentsSameAsWhole(t *testing.T) {
	queues, multi := 0, 0
	for _, ds := range qxDatasets {
		vdir := qxExtract(t, ds.tarball)
		ents, err := os.ReadDir(filepath.Join(vdir, "queues"))
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ents {
			dir := filepath.Join(vdir, "queues", e.Name())
			want, err := ReadQueueDir(dir, rfmt.LegacySegmentEntryCount)
			if err != nil {
				t.Fatal(err)
			}
			got, calls, q, err := segmentsOf(t, dir, rfmt.LegacySegmentEntryCount)
			if err != nil {
				t.Fatalf("%s: %v", dir, err)
			}
			if len(got) != len(want.Entries) || (len(got) > 0 && !reflect.DeepEqual(got, want.Entries)) {
				t.Errorf("%s %s: %d entries by segment, %d whole (or they differ)", ds.name, e.Name(), len(got), len(want.Entries))
			}
			if !reflect.DeepEqual(q.Anomalies, want.Anomalies) || q.Entries != nil || q.Refs != nil {
				t.Errorf("%s %s: anomalies %v, want %v (entries %d, refs %d left)", ds.name, e.Name(), q.Anomalies, want.Anomalies, len(q.Entries), len(q.Refs))
			}
			queues++
			if calls > 1 {
				multi++
			}
		}
	}
	// A v2 queue of three segments (4096, 4096 and 7 entries): three calls.
	dir := t.TempDir()
	for seg, n := range []int{4096, 4096, 7} {
		os.WriteFile(filepath.Join(dir, strconv.Itoa(seg)+".qi"), qiTestFile(uint64(seg)*4096, 4096, n), 0o644)
	}
	want, err := ReadQueueDir(dir, rfmt.LegacySegmentEntryCount)
	if err != nil {
		t.Fatal(err)
	}
	got, calls, _, err := segmentsOf(t, dir, rfmt.LegacySegmentEntryCount)
	if err != nil || calls != 3 || len(want.Entries) != 4096*2+7 || !reflect.DeepEqual(got, want.Entries) {
		t.Errorf("three segments: %v, %d calls, %d entries by segment, %d whole", err, calls, len(got), len(want.Entries))
	}
	if queues < 6 {
		t.Fatalf("only %d queue dirs compared", queues)
	}
	t.Logf("%d queue dirs compared, %d handed over in several segments", queues, multi)
}

// TestQueueDirSegmentsOrder: a v2 queue whose second segment's header
// claims seq ids below the first's cannot be streamed in seq order: the
// reader says ErrSegmentOrder (callers then read the dir whole), and an
// error from fn stops the read.
func TestQueueDirSegmentsOrder(t *testing.T) {
	dir := t.TempDir()
	// Segment 0 spans seq 0-4095 and holds 0, 1, 2; segment 1's header
	// says it spans one seq id, so the broker numbers its slot 0 as seq 1.
	os.WriteFile(filepath.Join(dir, "0.qi"), qiTestFile(0, 4096, 3), 0o644)
	os.WriteFile(filepath.Join(dir, "1.qi"), qiTestFile(0, 1, 1), 0o644)
	whole, err := ReadQueueDir(dir, rfmt.LegacySegmentEntryCount)
	if err != nil || len(whole.Entries) != 4 {
		t.Fatalf("whole read: %v, %d entries", err, len(whole.Entries))
	}
	if whole.Entries[1].SeqID != 1 || whole.Entries[2].SeqID != 1 {
		t.Fatalf("fixture does not overlap: seq ids %d %d %d %d", whole.Entries[0].SeqID, whole.Entries[1].SeqID, whole.Entries[2].SeqID, whole.Entries[3].SeqID)
	}
	if _, _, _, err := segmentsOf(t, dir, rfmt.LegacySegmentEntryCount); !errors.Is(err, ErrSegmentOrder) {
		t.Errorf("overlapping segments: err %v, want ErrSegmentOrder", err)
	}
	stop := errors.New("stop")
	if _, err := ReadQueueDirSegments(dir, rfmt.LegacySegmentEntryCount, func(*QueueDir, []QueueEntry) error { return stop }); !errors.Is(err, stop) {
		t.Errorf("fn's error: got %v", err)
	}
}

// qiTestFile is a v2 .qi whose header spans [from, from+span) and whose
// first n slots are persistent shared-store publishes of ids 1..n.
func qiTestFile(from, span uint64, n int) []byte {
	b := make([]byte, 64+32*n)
	copy(b, "RCQI")
	b[4] = 2
	binary.BigEndian.PutUint64(b[5:], from)
	binary.BigEndian.PutUint64(b[13:], from+span)
	for i := range n {
		e := b[64+32*i:]
		e[0], e[1], e[3] = 1, 1, 1
		e[4] = byte(i + 1)
	}
	return b
}

// FuzzQueueDirSegments: for any two .qi segments (and a .qs for the
// first), reading segment by segment either hands over exactly the
// entries and anomalies of the whole-dir read, in order, or says
// ErrSegmentOrder; neither panics. The lean readers agree too: the
// references handed over from recycled buffers (ReadVHostQueuesRefsFunc's
// reader) are the ones a references-only read keeps, and
// ReadQueueDirSegmentsIDs's entries are the segment reader's with ids as
// bytes.
func FuzzQueueDirSegments(f *testing.F) {
	qis := qxFixtureFiles(f, ".qi")
	qss := qxFixtureFiles(f, ".qs")
	for i := 0; i < len(qis) && i < 4; i++ {
		qs := []byte(nil)
		if i < len(qss) {
			qs = qss[i]
		}
		f.Add(qis[i], qis[(i+1)%len(qis)], qs)
	}
	f.Add(qiTestFile(0, 4096, 3), qiTestFile(0, 1, 1), []byte(nil))
	f.Fuzz(func(t *testing.T, qi0, qi1, qs0 []byte) {
		dir := t.TempDir()
		os.WriteFile(filepath.Join(dir, "0.qi"), qi0, 0o644)
		os.WriteFile(filepath.Join(dir, "1.qi"), qi1, 0o644)
		if qs0 != nil {
			os.WriteFile(filepath.Join(dir, "0.qs"), qs0, 0o644)
		}
		want, err := ReadQueueDir(dir, rfmt.LegacySegmentEntryCount)
		if err != nil {
			t.Fatal(err)
		}
		var handed []QueueRef
		hq, herr := readQueueDirWith(dir, rfmt.LegacySegmentEntryCount, true, nil,
			func(_ *QueueDir, r []QueueRef) { handed = append(handed, r...) }, false)
		kept, kerr := readQueueDir(dir, rfmt.LegacySegmentEntryCount, true)
		if (herr == nil) != (kerr == nil) {
			t.Fatalf("references handed over: %v; kept: %v", herr, kerr)
		}
		if herr == nil && (len(handed) != len(kept.Refs) || (len(handed) > 0 && !reflect.DeepEqual(handed, kept.Refs)) ||
			!reflect.DeepEqual(hq.Anomalies, kept.Anomalies)) {
			t.Fatalf("%d references handed over, %d kept (or they or the anomalies differ)", len(handed), len(kept.Refs))
		}
		var byID []QueueEntry
		_, ierr := ReadQueueDirSegmentsIDs(dir, rfmt.LegacySegmentEntryCount, func(_ *QueueDir, es []QueueEntry) error {
			byID = append(byID, es...)
			return nil
		})
		got, _, q, err := segmentsOf(t, dir, rfmt.LegacySegmentEntryCount)
		if (ierr == nil) != (err == nil) || len(byID) != len(got) {
			t.Fatalf("ids as bytes: %d entries (%v); hex: %d (%v)", len(byID), ierr, len(got), err)
		}
		for i := range byID {
			e := byID[i]
			if e.HasID {
				e.MsgID = hex.EncodeToString(e.ID[:])
			}
			if !reflect.DeepEqual(e, got[i]) {
				t.Fatalf("entry %d: ids as bytes %+v, hex %+v", i, byID[i], got[i])
			}
		}
		if errors.Is(err, ErrSegmentOrder) {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(want.Entries) || (len(got) > 0 && !reflect.DeepEqual(got, want.Entries)) {
			t.Fatalf("%d entries by segment, %d whole (or they differ)", len(got), len(want.Entries))
		}
		if !reflect.DeepEqual(q.Anomalies, want.Anomalies) {
			t.Fatalf("anomalies %v, want %v", q.Anomalies, want.Anomalies)
		}
	})
}

// TestQueueDirKeepsNoScratch: a queue dir read (whole, by segment or
// references only) keeps none of its per-segment decode buffers (a vhost
// can have thousands of queue dirs, each buffer 2 x 4096 slots).
func TestQueueDirKeepsNoScratch(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "0.qi"), qiTestFile(0, 4096, 100), 0o644)
	q1, err := ReadQueueDir(dir, rfmt.LegacySegmentEntryCount)
	if err != nil {
		t.Fatal(err)
	}
	_, _, q2, err := segmentsOf(t, dir, rfmt.LegacySegmentEntryCount)
	if err != nil {
		t.Fatal(err)
	}
	q3, err := readQueueDir(dir, rfmt.LegacySegmentEntryCount, true)
	if err != nil {
		t.Fatal(err)
	}
	for i, q := range []*QueueDir{q1, q2, q3} {
		if q.dirReader != nil {
			s := q.qiScratch
			t.Errorf("read %d keeps its reader (%d+%d scratch slots)", i, cap(s.Records), cap(s.WalkerRefs))
		}
	}
	if len(q1.Entries) != 100 {
		t.Fatalf("%d entries, want 100", len(q1.Entries))
	}
}
