package dledger

import (
	"context"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/storectl/storectl/internal/testutil"
	rmq "github.com/storectl/storectl/pkg/format/rocketmq"
	"github.com/storectl/storectl/pkg/scan"
)

func TestMain(m *testing.M) {
	code := m.Run()
	testutil.RemoveShared()
	os.Exit(code)
}

// fixture unpacks a dataset once per test binary (read-only users)
// and returns its store dir.
func fixture(t testing.TB, ds string) string {
	t.Helper()
	return filepath.Join(testutil.SharedUntar(t, testutil.Testdata("rocketmq-5x", "rmq533-"+ds+".tar.gz")), "store")
}

type dlLine struct {
	Kind             string `json:"kind"`
	Phase            string `json:"phase"`
	LedgerBeginIndex int64  `json:"ledger_begin_index"`
	LedgerEndIndex   int64  `json:"ledger_end_index"`
	LedgerEndTerm    int64  `json:"ledger_end_term"`
	CommittedIndex   int64  `json:"committed_index"`
	CommittedPos     int64  `json:"committed_pos"`
	WritePos         int64  `json:"write_pos"`
	StoreMax         int64  `json:"store_max_phy_offset"`
	StoreMin         int64  `json:"store_min_phy_offset"`
	DataFiles        []struct {
		Name  string `json:"name"`
		Wrote int64  `json:"wrote_position"`
	} `json:"data_files"`
	IndexFiles []struct {
		Name  string `json:"name"`
		Wrote int64  `json:"wrote_position"`
	} `json:"index_files"`
	Entries   [][4]int64 `json:"entries"`
	Topic     string     `json:"topic"`
	QueueID   int32      `json:"queue_id"`
	MinOffset int64      `json:"min_offset"`
	MaxOffset int64      `json:"max_offset"`
}

// TestOracleRecovery: for DL1-DL3 the predicted DLedger recovery equals
// what the real DLedgerMmapFileStore.recover and DLedgerCommitLog did
// after load: begin/end index and term, write position, committed index
// and position, the broker's max/min offset, every data and index file's
// wrote position, every [index, term, pos, size] DLedger serves after
// load, and every consume queue's min and max offset.
func TestOracleRecovery(t *testing.T) {
	for _, ds := range []string{"dl1-clean", "dl2-kill", "dl3-hdr"} {
		t.Run(ds, func(t *testing.T) {
			res, err := Scan(context.Background(), Config{Root: fixture(t, ds), KeepEntries: true}, scan.Options{Jobs: 2})
			if err != nil || res.Incomplete {
				t.Fatalf("%v %v", err, res.Errors)
			}
			rc := res.Extra["dledger"].(*Recovery)
			var dl, ents dlLine
			cqs := map[string]dlLine{}
			for _, l := range testutil.ReadJSONL[dlLine](t, testutil.Testdata("rocketmq-5x", "rmq533-"+ds+".recover.jsonl")) {
				if l.Phase != "after_load" {
					continue
				}
				switch l.Kind {
				case "dledger":
					dl = l
				case "dledger_entries":
					ents = l
				case "consume_queue":
					cqs[l.Topic+"/"+itoa(l.QueueID)] = l
				}
			}
			diffs := 0
			chk := func(name string, got, want int64) {
				if got != want {
					diffs++
					t.Errorf("%s: predicted %d, real %d", name, got, want)
				}
			}
			chk("ledger begin index", rc.LedgerBeginIndex, dl.LedgerBeginIndex)
			chk("ledger end index", rc.LedgerEndIndex, dl.LedgerEndIndex)
			chk("ledger end term", rc.LedgerEndTerm, dl.LedgerEndTerm)
			chk("committed index", rc.CommittedIndex, dl.CommittedIndex)
			chk("committed pos", rc.CommittedPos, dl.CommittedPos)
			chk("write pos", rc.WritePos, dl.WritePos)
			chk("store max offset", rc.StoreMaxOffset, dl.StoreMax)
			chk("store min offset", rc.StoreMinOffset, dl.StoreMin)
			chk("uncommitted entries", int64(rc.Uncommitted), dl.LedgerEndIndex-dl.CommittedIndex)
			for _, f := range dl.DataFiles {
				chk("wrote position of data/"+f.Name, wrote(t, res, f.Name, rc.WritePos), f.Wrote)
			}
			for _, f := range dl.IndexFiles {
				chk("wrote position of index/"+f.Name, rc.IndexWritePos, f.Wrote)
			}
			if len(rc.EntryList) != len(ents.Entries) {
				diffs++
				t.Errorf("%d entries kept, real %d", len(rc.EntryList), len(ents.Entries))
			}
			for i := range min(len(rc.EntryList), len(ents.Entries)) {
				if rc.EntryList[i] != ents.Entries[i] {
					diffs++
					t.Errorf("entry %d: %v, real %v", i, rc.EntryList[i], ents.Entries[i])
				}
			}
			for _, q := range rc.Queues {
				o, ok := cqs[q.Topic+"/"+itoa(q.QueueID)]
				if !ok {
					diffs++
					t.Errorf("queue %s/%d not in the oracle", q.Topic, q.QueueID)
					continue
				}
				chk("max offset of "+q.Topic+"/"+itoa(q.QueueID), q.MaxOffset, o.MaxOffset)
				delete(cqs, q.Topic+"/"+itoa(q.QueueID))
			}
			for k := range cqs {
				diffs++
				t.Errorf("queue %s not predicted", k)
			}
			t.Logf("%s: end index %d pos %d, committed %d/%d, %d entries and %d queues compared, %d differences", ds,
				rc.LedgerEndIndex, rc.WritePos, rc.CommittedIndex, rc.CommittedPos, len(ents.Entries), len(rc.Queues), diffs)
			_, codes := res.Counts()
			t.Logf("findings: %v", codes)
		})
	}
}

func itoa(i int32) string { return string(rune('0' + i%10)) }

// wrote is a data file's wrote position after recovery's truncateOffset.
func wrote(t *testing.T, res *scan.Result, name string, writePos int64) int64 {
	for _, f := range res.Files {
		if filepath.Base(f.Path) == name && f.Kind == "dledger-data" {
			base := int64(0)
			for _, c := range name {
				base = base*10 + int64(c-'0')
			}
			switch {
			case base+f.Size <= writePos:
				return f.Size
			case base <= writePos:
				return writePos - base
			}
			return -1
		}
	}
	t.Fatalf("no data file %s", name)
	return 0
}

// TestDroppedMsgIDs: the message ids of the entries DLedger's recovery
// drops (DL3: the 38 entries from the one whose index was raised by 1000)
// are the ids of those entries' inner records as the real code decoded
// them (their store host and stored physical offset), in log order.
func TestDroppedMsgIDs(t *testing.T) {
	res, err := Scan(context.Background(), Config{Root: fixture(t, "dl3-hdr")}, scan.Options{Jobs: 2})
	if err != nil || res.Incomplete {
		t.Fatalf("%v %v", err, res.Errors)
	}
	rc := res.Extra["dledger"].(*Recovery)
	var got []string
	for _, f := range res.Findings {
		if f.Code == CodeDropped {
			got = f.Details["msg_ids"].([]string)
		}
	}
	type entryLine struct {
		Kind       string `json:"kind"`
		DLedgerPos int64  `json:"dledger_pos"`
		Inner      *struct {
			StoredPhy int64  `json:"stored_phy_offset"`
			StoreHost string `json:"store_host"`
		} `json:"inner"`
	}
	var want []string
	for _, l := range testutil.ReadJSONL[entryLine](t, testutil.Testdata("rocketmq-5x", "rmq533-dl3-hdr.decode.jsonl")) {
		if l.Kind != "dledger_entry" || l.DLedgerPos < rc.WritePos || l.Inner == nil {
			continue
		}
		h := strings.TrimPrefix(l.Inner.StoreHost, "/") // Java's InetSocketAddress: /1.2.3.4:5 or /[v6]:5
		i := strings.LastIndexByte(h, ':')
		addr, err := netip.ParseAddr(strings.Trim(h[:i], "[]"))
		if err != nil {
			t.Fatalf("store host %q: %v", l.Inner.StoreHost, err)
		}
		port, err := strconv.Atoi(h[i+1:])
		if err != nil {
			t.Fatalf("store host %q: %v", l.Inner.StoreHost, err)
		}
		m := rmq.Message{StoreHost: rmq.Host{Addr: addr, Port: int32(port)}, PhysicalOffset: l.Inner.StoredPhy}
		want = append(want, m.MsgID())
	}
	if rc.Dropped != 38 || len(want) != 38 {
		t.Fatalf("%d entries dropped, %d in the oracle after the write position %d; want 38", rc.Dropped, len(want), rc.WritePos)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("dropped msg ids\n got %v\nwant %v", got, want)
	}
}
