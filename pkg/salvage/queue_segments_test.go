package salvage

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/storectl/storectl/internal/testutil"
	rfmt "github.com/storectl/storectl/pkg/format/rabbitmq"
	rscan "github.com/storectl/storectl/pkg/scan/rabbitmq"
)

// TestQueueMessagesBySegment: queueMessages reads each queue dir one .qi
// segment at a time and gives what reading it whole gives, on the CQ v2
// crash datasets (small messages in .qs) and on one whose queue got a
// second segment overlapping the first in seq ids (the segment reader
// stops with ErrSegmentOrder after handing over the first: the dir is
// then read whole, and nothing is taken twice).
func TestQueueMessagesBySegment(t *testing.T) {
	for _, ds := range []struct {
		fixture, name, node string
		overlap             bool
	}{
		{"rabbitmq", "crash-cqv2", "rmqfix@localhost", false},
		{"rabbitmq", "crash", "rmqfix@localhost", false},
		{"rabbitmq-4.0", "crash", "rmq40@localhost", false},
		{"rabbitmq", "crash-cqv2", "rmqfix@localhost", true},
	} {
		root := testutil.Untar(t, testutil.Testdata(ds.fixture, "datasets", ds.name+".tar.gz"))
		vdir := filepath.Join(root, ds.node, "msg_stores", "vhosts", vhostHash)
		if ds.overlap {
			overlapQueueSegment(t, vdir)
		}
		vs, err := rscan.ScanVHost(t.Context(), root, vdir, rscan.VHostOptions{})
		if err != nil {
			t.Fatal(err)
		}
		o := Options{Select: []Selection{SelectAll, SelectLost}}
		run := func(whole bool) ([]*queueMsg, *Report) {
			wholeQueueDirs = whole
			defer func() { wholeQueueDirs = false }()
			rep := &Report{By: map[string]int{}}
			out, err := queueMessages(root, vs, o, rep, map[[16]byte]bool{})
			if err != nil {
				t.Fatal(err)
			}
			return out, rep
		}
		before := wholeReads.Load()
		got, grep := run(false)
		fell := wholeReads.Load() - before
		want, wrep := run(true)
		name := ds.fixture + "/" + ds.name
		if ds.overlap != (fell > 0) {
			t.Errorf("%s: %d dirs read whole after the segment reader, want them only with the overlap", name, fell)
		}
		if len(want) == 0 {
			t.Fatalf("%s: no message in the queues' own files", name)
		}
		if !reflect.DeepEqual(got, want) || !reflect.DeepEqual(grep, wrep) {
			t.Errorf("%s: by segment %d messages, whole %d (reports %+v / %+v)", name, len(got), len(want), grep, wrep)
		}
	}
}

// overlapQueueSegment gives a queue of vdir whose segment 0 holds a .qs
// entry a segment 1 (1.qi, 1.qs) whose header span is 1 (so its slot 0 is
// seq 1, inside segment 0) and whose slot 0 is a copy of that entry.
func overlapQueueSegment(t *testing.T, vdir string) {
	t.Helper()
	qis, _ := filepath.Glob(filepath.Join(vdir, "queues", "*", "0.qi"))
	for _, qi := range qis {
		dir := filepath.Dir(qi)
		q, err := rscan.ReadQueueDir(dir, rfmt.LegacySegmentEntryCount)
		if err != nil {
			t.Fatal(err)
		}
		var e *rscan.QueueEntry
		for i := range q.Entries {
			if q.Entries[i].Location == rscan.LocationQueueStore && q.Entries[i].SeqID > 1 {
				e = &q.Entries[i]
				break
			}
		}
		if e == nil {
			continue
		}
		b, err := os.ReadFile(qi)
		if err != nil {
			t.Fatal(err)
		}
		const hdr, slot = 64, 32
		copy(b[hdr:hdr+slot], b[hdr+int(e.SeqID)*slot:])
		binary.BigEndian.PutUint64(b[5:], 0)
		binary.BigEndian.PutUint64(b[13:], 1)
		if err := os.WriteFile(filepath.Join(dir, "1.qi"), b, 0o644); err != nil {
			t.Fatal(err)
		}
		qs, err := os.ReadFile(filepath.Join(dir, "0.qs"))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "1.qs"), qs, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Fatal("no queue with a .qs entry past seq 1")
}
