package rocketmq

import (
	"bytes"
	"os"
	"testing"

	"github.com/storectl/storectl/internal/testutil"
)

func readD1(t testing.TB) []byte {
	b, err := os.ReadFile(testutil.Testdata("rocketmq-5x", "rmq533-d1-consumeroffset.consumerOffset.json"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestConsumerOffsetsD1 decodes the fastjson-layout consumerOffset.json of
// D1 (bare integer queue keys) and checks every committed offset against
// the dataset's expected list.
func TestConsumerOffsetsD1(t *testing.T) {
	b := readD1(t)
	tab, err := DecodeConsumerOffsets(b)
	if err != nil {
		t.Fatal(err)
	}
	type exp struct {
		TopicGroup string `json:"topic_group"`
		QueueID    int32  `json:"queue_id"`
		Committed  int64  `json:"committed_offset"`
	}
	want := testutil.ReadJSONL[exp](t, testutil.Testdata("rocketmq-5x", "rmq533-d1-consumeroffset.expected.jsonl"))
	if len(tab.Offsets) != len(want) {
		t.Fatalf("%d offsets, want %d", len(tab.Offsets), len(want))
	}
	got := map[exp]bool{}
	for _, o := range tab.Offsets {
		got[exp{o.Topic + "@" + o.Group, o.QueueID, o.Offset}] = true
		if string(b[o.Start:o.End]) != string(rune('0'+o.Offset)) {
			t.Errorf("%s/%d: span %q", o.Key, o.QueueID, b[o.Start:o.End])
		}
	}
	for _, w := range want {
		if !got[w] {
			t.Errorf("missing %+v", w)
		}
	}
	if tab.DataVersion.Counter != 3 || tab.DataVersion.Timestamp != 1796163780000 {
		t.Errorf("dataVersion %+v", tab.DataVersion)
	}
	// Rewriting every offset with its own value gives the same bytes;
	// lowering one changes only its digits.
	same, err := SetOffsets(b, tab.Offsets)
	if err != nil || !bytes.Equal(same, b) {
		t.Fatalf("SetOffsets with unchanged values changed the file: %v", err)
	}
	o := tab.Offsets[0]
	o.Offset = 0
	one, err := SetOffsets(b, []QueueOffset{o})
	if err != nil || len(one) != len(b) || !bytes.Equal(one[:o.Start], b[:o.Start]) || !bytes.Equal(one[o.End:], b[o.End:]) {
		t.Fatalf("SetOffsets changed more than the number: %v", err)
	}
	back, err := DecodeConsumerOffsets(one)
	if err != nil || back.Offsets[0].Offset != 0 {
		t.Fatalf("rewritten file: %+v %v", back.Offsets[0], err)
	}
}

func TestDelayOffsetsAndTopics(t *testing.T) {
	tab, err := DecodeDelayOffsets([]byte(`{"offsetTable":{1:0,3:12},"dataVersion":{"counter":7,"stateVersion":0,"timestamp":5}}`))
	if err != nil || len(tab.Offsets) != 2 || tab.Offsets[1].QueueID != 3 || tab.Offsets[1].Offset != 12 || tab.DataVersion.Counter != 7 {
		t.Fatalf("%+v %v", tab, err)
	}
	tops, _, err := DecodeTopics([]byte(`{"topicConfigTable":{"TopicA":{"readQueueNums":4,"writeQueueNums":4,"perm":6}},"dataVersion":{"counter":1}}`))
	if err != nil || len(tops) != 1 || tops[0].ReadQueueNums != 4 {
		t.Fatalf("%+v %v", tops, err)
	}
	// A torn file (cut mid-document) is a CorruptError at the cut.
	b := readD1(t)
	_, err = DecodeConsumerOffsets(b[:len(b)/2])
	mustCorrupt(t, err)
	if err == nil {
		t.Fatal("a torn consumerOffset.json decoded")
	}
}

func TestRocksDBNames(t *testing.T) {
	l := ClassifyRocksDB([]string{"CURRENT", "IDENTITY", "LOCK", "LOG", "MANIFEST-000005", "OPTIONS-000007", "000004.log", "000009.sst", "TopicA"})
	if !l.IsDB() || len(l.Files()) != 8 {
		t.Fatalf("%+v", l)
	}
	if ClassifyRocksDB([]string{"TopicA", "rmq_sys_wheel_timer", "%RETRY%G"}).IsDB() {
		t.Fatal("topic dirs taken for RocksDB")
	}
	o, err := DecodeRocksDBOptions([]byte("# This is a RocksDB option file.\n[Version]\n  rocksdb_version=8.10.0\n  options_file_version=1.1\n[DBOptions]\n  x=1\n[CFOptions \"default\"]\n[CFOptions \"offset\"]\n"))
	if err != nil || o.Version != "8.10.0" || len(o.ColumnFamilies) != 2 || o.ColumnFamilies[1] != "offset" {
		t.Fatalf("%+v %v", o, err)
	}
	if _, err := DecodeRocksDBOptions([]byte("garbage")); err == nil {
		t.Fatal("no [Version] accepted")
	}
	if m, err := DecodeRocksDBCurrent([]byte("MANIFEST-000005\n")); err != nil || m != "MANIFEST-000005" {
		t.Fatal(m, err)
	}
}

func FuzzParseFastJSON(f *testing.F) {
	b := readD1(f)
	f.Add(b)
	f.Add(b[:len(b)/3])
	f.Add([]byte(`{"offsetTable":{1:0,3:12},"a":[1,"x\u00e9",true,null,{}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		v, err := ParseFastJSON(b)
		mustCorrupt(t, err)
		if err == nil && (v.Start < 0 || v.End > int64(len(b)) || v.Start > v.End) {
			t.Fatalf("span %d..%d out of %d bytes", v.Start, v.End, len(b))
		}
		tab, err := DecodeConsumerOffsets(b)
		mustCorrupt(t, err)
		if err == nil {
			if same, err := SetOffsets(b, tab.Offsets); err != nil || !bytes.Equal(same, b) {
				t.Fatalf("SetOffsets round trip: %v", err)
			}
		}
		_, err = DecodeDelayOffsets(b)
		mustCorrupt(t, err)
		_, _, err = DecodeTopics(b)
		mustCorrupt(t, err)
	})
}

func FuzzDecodeRocksDBOptions(f *testing.F) {
	f.Add([]byte("[Version]\n  rocksdb_version=8.10.0\n[CFOptions \"default\"]\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		_, err := DecodeRocksDBOptions(b)
		mustCorrupt(t, err)
		_, err = DecodeRocksDBCurrent(b)
		mustCorrupt(t, err)
	})
}
