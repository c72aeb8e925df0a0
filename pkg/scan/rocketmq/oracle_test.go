package rocketmq

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/storectl/storectl/internal/testutil"
	"github.com/storectl/storectl/pkg/scan"
)

// oracleMsg is a `msg` line of <ds>.decode.jsonl: what the real broker's
// checkMessageAndReturnSize + MessageDecoder.decode saw.
type oracleMsg struct {
	Kind             string  `json:"kind"`
	File             string  `json:"file"`
	Pos              int64   `json:"pos"`
	PhyOffset        int64   `json:"phy_offset"`
	TotalSize        int64   `json:"total_size"`
	StoredPhyOffset  int64   `json:"stored_phy_offset"`
	StoredMatches    bool    `json:"stored_offset_matches"`
	Topic            string  `json:"topic"`
	QueueID          int32   `json:"queue_id"`
	QueueOffset      int64   `json:"queue_offset"`
	SysFlag          int32   `json:"sys_flag"`
	TagsCode         int64   `json:"tags_code"`
	StoreTimestamp   int64   `json:"store_timestamp"`
	BornTimestamp    int64   `json:"born_timestamp"`
	BornHost         string  `json:"born_host"`
	StoreHost        string  `json:"store_host"`
	ReconsumeTimes   int32   `json:"reconsume_times"`
	PreparedTxOffset int64   `json:"prepared_tx_offset"`
	BodyCRC          int64   `json:"body_crc"`
	BodyLen          int     `json:"body_len"`
	BodySHA256       string  `json:"body_sha256"`
	MsgID            string  `json:"msg_id"`
	Keys             *string `json:"keys"`
	UniqKey          *string `json:"uniq_key"`
	Tags             *string `json:"tags"`
	Properties       string  `json:"properties"`
	// raw_consume_queue lines
	QueueTopic string    `json:"-"`
	Entries    [][]int64 `json:"entries"`
}

type oracle struct {
	msgs []oracleMsg
	cq   map[int64]int64 // phy offset -> tagsCode, from raw_consume_queue
}

func readOracle(t *testing.T, name string) oracle {
	t.Helper()
	f, err := os.Open(testutil.Testdata("rocketmq", name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	o := oracle{cq: map[int64]int64{}}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		var m oracleMsg
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		switch m.Kind {
		case "msg":
			o.msgs = append(o.msgs, m)
		case "raw_consume_queue":
			for _, e := range m.Entries {
				o.cq[e[1]] = e[3]
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return o
}

// recoverMax returns the real broker's max_phy_offset after load() from
// a *.recover.jsonl file.
func recoverMax(t *testing.T, name string) int64 {
	t.Helper()
	b, err := os.ReadFile(testutil.Testdata("rocketmq", name))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		var v struct {
			Kind  string `json:"kind"`
			Phase string `json:"phase"`
			Max   int64  `json:"max_phy_offset"`
		}
		if json.Unmarshal([]byte(line), &v) == nil && v.Kind == "commitlog" && v.Phase == "after_load" {
			return v.Max
		}
	}
	t.Fatalf("%s: no after_load commitlog line", name)
	return 0
}

func scanDataset(t *testing.T, ds string) (string, *scan.Result, []Record) {
	t.Helper()
	dir := testutil.Untar(t, testutil.Testdata("rocketmq", ds+".tar.gz"))
	root := filepath.Join(dir, "store")
	before := testutil.TreeHash(t, root)
	var recs []Record
	res, err := ScanCommitLog(context.Background(), Config{Root: root}, scan.Options{Records: func(r any) error {
		recs = append(recs, r.(Record))
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	testutil.SameTree(t, before, testutil.TreeHash(t, root))
	return root, res, recs
}

// javaHost parses Java's InetSocketAddress.toString ("/1.2.3.4:5",
// "/[0:0:0:0:0:0:0:1]:5") for comparison with Record hosts.
func javaHost(t *testing.T, s string) netip.AddrPort {
	ap, err := netip.ParseAddrPort(strings.TrimPrefix(s, "/"))
	if err != nil {
		t.Fatalf("oracle host %q: %v", s, err)
	}
	return ap
}

func strp(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// javaProps is an independent reading of string2messageProperties used
// only to check the Record's properties map against the oracle's raw text.
func javaProps(s string) map[string]string {
	out := map[string]string{}
	for _, seg := range strings.Split(s, "\x02") {
		i := strings.IndexByte(seg, 1)
		if i > 0 && i < len(seg)-1 {
			out[seg[:i]] = seg[i+1:]
		}
	}
	return out
}

// compareRecord lists the fields where r differs from the oracle line.
func compareRecord(t *testing.T, r Record, o oracleMsg, cqTags map[int64]int64) []string {
	var d []string
	chk := func(name string, got, want any) {
		if fmt.Sprint(got) != fmt.Sprint(want) {
			d = append(d, fmt.Sprintf("%s: got %v want %v", name, got, want))
		}
	}
	chk("path", r.Path, "commitlog/"+o.File)
	chk("offset", r.Offset, o.Pos)
	chk("phy_offset", r.PhyOffset, o.PhyOffset)
	chk("size", r.Size, o.TotalSize)
	chk("stored_phy_offset", r.StoredPhyOffset, o.StoredPhyOffset)
	chk("topic", r.Topic, o.Topic)
	chk("queue_id", r.QueueID, o.QueueID)
	chk("queue_offset", r.QueueOffset, o.QueueOffset)
	chk("sys_flag", r.SysFlag, o.SysFlag)
	wantTags := o.TagsCode
	if o.Topic == "SCHEDULE_TOPIC_XXXX" {
		// The decode walk ran without a started ScheduleMessageService, so
		// its delay table was empty and it printed 0; the broker's real
		// consume queue holds storeTimestamp + delay. Compare with that.
		v, ok := cqTags[o.PhyOffset]
		if !ok {
			d = append(d, "no consume-queue unit for SCHEDULE_TOPIC_XXXX record")
		}
		wantTags = v
	}
	chk("tags_code", r.TagsCode, strconv.FormatInt(wantTags, 10))
	chk("store_timestamp", r.StoreTimestamp, o.StoreTimestamp)
	chk("born_timestamp", r.BornTimestamp, o.BornTimestamp)
	chk("born_host", r.BornHost, javaHost(t, o.BornHost))
	chk("store_host", r.StoreHost, javaHost(t, o.StoreHost))
	chk("reconsume_times", r.ReconsumeTimes, o.ReconsumeTimes)
	chk("prepared_tx_offset", r.PreparedTxOffset, o.PreparedTxOffset)
	chk("body_crc", r.BodyCRC, strconv.FormatInt(o.BodyCRC, 10))
	chk("body_size", r.BodySize, o.BodyLen)
	chk("body_sha256", r.BodySHA256, o.BodySHA256)
	chk("msg_id", r.MsgID, o.MsgID)
	chk("keys", r.Keys, strp(o.Keys))
	chk("tags", r.Tags, strp(o.Tags))
	chk("uniq_key", r.UniqKey, strp(o.UniqKey))
	// The oracle's properties text is MessageDecoder's re-serialisation of
	// the parsed map (HashMap order), not the stored bytes: with
	// __CRC32# (appended last on disk) the order differs. Compare parsed
	// maps, then the stored text as a set of segments.
	chk("properties_raw_as_map", javaProps(r.PropertiesRaw), javaProps(o.Properties))
	chk("properties", r.Properties, javaProps(o.Properties))
	return d
}
