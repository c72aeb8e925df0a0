package rocketmq

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"path"
	"strings"
	"testing"

	"github.com/storectl/storectl/internal/testutil"
)

const fixtureDS = "rmq533-a-clean"

type oracleLine struct {
	Kind     string    `json:"kind"`
	Topic    string    `json:"topic"`
	QueueID  int       `json:"queue_id"`
	Files    []string  `json:"files"`
	Entries  [][]int64 `json:"entries"`
	File     string    `json:"file"`
	FileSize int64     `json:"file_size"`
	BeginTS  int64     `json:"begin_timestamp"`
	EndTS    int64     `json:"end_timestamp"`
	BeginPhy int64     `json:"begin_phy_offset"`
	EndPhy   int64     `json:"end_phy_offset"`
	Slots    int32     `json:"hash_slot_count"`
	Count    int32     `json:"index_count"`
	Physic   int64     `json:"physic_msg_timestamp"`
	Logics   int64     `json:"logics_msg_timestamp"`
	IndexTS  int64     `json:"index_msg_timestamp"`
	MinTS    int64     `json:"min_timestamp"`
	Pos      int64     `json:"pos"`
	Total    int64     `json:"total_size"`
}

// loadFixture reads the fixture's files into memory (keyed by their path
// under store/) and the broker's dump of them.
func loadFixture(t testing.TB) (map[string][]byte, []oracleLine) {
	t.Helper()
	files := map[string][]byte{}
	for name, b := range testutil.ReadTar(t, testutil.Testdata("rocketmq", fixtureDS+".tar.gz")) {
		if rel, ok := strings.CutPrefix(name, "store/"); ok {
			files[rel] = b
		}
	}
	f, err := os.Open(testutil.Testdata("rocketmq", fixtureDS+".decode.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []oracleLine
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		var l oracleLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatal(err)
		}
		out = append(out, l)
	}
	return files, out
}

// file returns the fixture file at rel (slash-separated, under store/).
func file(t testing.TB, files map[string][]byte, rel string) []byte {
	t.Helper()
	b, ok := files[rel]
	if !ok {
		t.Fatalf("fixture has no %s", rel)
	}
	return b
}

// TestFixtureConsumeQueue decodes every unit the broker dumped.
func TestFixtureConsumeQueue(t *testing.T) {
	root, lines := loadFixture(t)
	n := 0
	for _, l := range lines {
		if l.Kind != "raw_consume_queue" {
			continue
		}
		qdir := path.Join("consumequeue", l.Topic, itoa(l.QueueID))
		var stream []byte
		for _, name := range []string{"00000000000000000000", "00000000000000001000"} {
			stream = append(stream, root[path.Join(qdir, name)]...)
		}
		for _, e := range l.Entries {
			off := e[0] * CQUnitSize
			u, err := DecodeCQUnit(stream[off:], off)
			if err != nil || u.CommitLogOffset != e[1] || int64(u.Size) != e[2] || u.TagsCode != e[3] || !u.Valid() || u.IsPlaceholder() {
				t.Fatalf("%s/%d unit %d: %+v %v want %v", l.Topic, l.QueueID, e[0], u, err, e)
			}
			n++
		}
		end := int64(len(l.Entries)) * CQUnitSize
		if u, _ := DecodeCQUnit(stream[end:], end); !u.IsZero() {
			t.Fatalf("unit after the last is not zero: %+v", u)
		}
	}
	if n < 290 { // 300 messages minus the 2 PREPARED ones, which are not dispatched
		t.Fatalf("only %d units", n)
	}
	if _, err := DecodeCQUnit(make([]byte, 19), 7); err == nil {
		t.Fatal("short unit accepted")
	}
	if u := (CQUnit{Size: CQPlaceholderSize}); !u.IsPlaceholder() || !u.Valid() {
		t.Fatal("placeholder")
	}
}

func itoa(i int) string { return string(rune('0' + i)) }

// TestFixtureIndexAndCheckpoint compares headers with the broker's
// IndexHeader.load and StoreCheckpoint.
func TestFixtureIndexAndCheckpoint(t *testing.T) {
	root, lines := loadFixture(t)
	seen := 0
	for _, l := range lines {
		switch l.Kind {
		case "index_header":
			b := file(t, root, path.Join("index", l.File))
			h, err := DecodeIndexHeader(b, 0)
			if err != nil || h.BeginTimestamp != l.BeginTS || h.EndTimestamp != l.EndTS || h.BeginPhyOffset != l.BeginPhy ||
				h.EndPhyOffset != l.EndPhy || h.HashSlotCount != l.Slots || h.IndexCount != l.Count {
				t.Fatalf("%s: %+v %v", l.File, h, err)
			}
			lay, err := IndexLayoutFromSize(int64(len(b)), 0)
			if err != nil || lay.Slots != 100 || lay.Entries != 400 || lay.Size() != l.FileSize {
				t.Fatalf("layout %+v %v", lay, err)
			}
			// The encoders write the broker's bytes back: header, every
			// slot and every entry.
			re := AppendIndexHeader(nil, h)
			for s := int64(0); s < lay.Slots; s++ {
				v, err := DecodeIndexSlot(b[lay.SlotOffset(s):], lay.SlotOffset(s))
				if err != nil {
					t.Fatal(err)
				}
				re = AppendIndexSlot(re, v)
			}
			for n := int64(0); n < lay.Entries; n++ {
				e, err := DecodeIndexEntry(b[lay.EntryOffset(n):], lay.EntryOffset(n))
				if err != nil {
					t.Fatal(err)
				}
				re = AppendIndexEntry(re, e)
			}
			if !bytes.Equal(re, b) {
				t.Fatalf("%s: re-encoded file differs", l.File)
			}
			// Every used slot heads a chain of entries whose hash maps to it.
			for s := int64(0); s < lay.Slots; s++ {
				so := lay.SlotOffset(s)
				n := int64(int32(be32(b[so:])))
				for steps := 0; n > 0 && n < int64(h.IndexCount) && steps < 400; steps++ {
					e, err := DecodeIndexEntry(b[lay.EntryOffset(n):], lay.EntryOffset(n))
					if err != nil || int64(e.KeyHash)%lay.Slots != s || e.PhyOffset < h.BeginPhyOffset || e.PhyOffset > h.EndPhyOffset {
						t.Fatalf("slot %d entry %d: %+v %v", s, n, e, err)
					}
					n = int64(e.PrevIndex)
				}
			}
			seen++
		case "checkpoint":
			b := file(t, root, "checkpoint")
			cp, err := DecodeCheckpoint(b, 0)
			if err != nil || cp.PhysicMsgTimestamp != l.Physic || cp.LogicsMsgTimestamp != l.Logics ||
				cp.IndexMsgTimestamp != l.IndexTS || cp.MinTimestamp() != l.MinTS {
				t.Fatalf("checkpoint %+v %v", cp, err)
			}
			// The encoders write the broker's bytes back.
			if got := AppendCheckpoint(nil, cp); !bytes.Equal(got, b[:CheckpointSize]) {
				t.Fatalf("AppendCheckpoint = %x, file has %x", got, b[:CheckpointSize])
			}
			ts := b[CheckpointTimestampsOffset : CheckpointTimestampsOffset+CheckpointTimestampsSize]
			if got := AppendCheckpointTimestamps(nil, cp.LogicsMsgTimestamp, cp.IndexMsgTimestamp); !bytes.Equal(got, ts) {
				t.Fatalf("AppendCheckpointTimestamps = %x, file has %x", got, ts)
			}
			seen++
		}
	}
	if seen != 3 {
		t.Fatalf("saw %d oracle lines", seen)
	}
	if _, err := IndexLayoutFromSize(41, 0); err == nil {
		t.Fatal("bad size accepted")
	}
	if l, err := IndexLayoutFromSize(420000040, DefaultIndexSlots); err != nil || l.Entries != DefaultIndexEntries {
		t.Fatal("default layout", l, err)
	}
}

func be32(b []byte) uint32 {
	return uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
}
