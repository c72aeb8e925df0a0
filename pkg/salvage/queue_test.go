package salvage

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/storectl/storectl/internal/testutil"
	rscan "github.com/storectl/storectl/pkg/scan/rabbitmq"
)

// dumpLine is one delivery of the restarted real broker
// (results/<dataset>/restart/dump.jsonl).
type dumpLine struct {
	MessageID string `json:"message_id"`
	Queue     string `json:"queue"`
	SHA256    string `json:"sha256"`
	Size      int64  `json:"size"`
}

// TestSelectAllSmallMessages: on the 3.10.8 crash datasets with CQ v2
// (small messages in .qs) and v1 (small messages embedded in .idx and
// journal.jif), and on the 4.0.5 crash dataset (.qs), --select all exports
// every message the restarted broker delivered: the AMQP message id and
// the body sha256 of each delivery match an exported message whose queues
// include the delivering queue, the small ones (never in an .rdq)
// included. Nothing more than the store holds: one message per store msg
// id, and every exported message the broker did not deliver is an
// unreferenced .rdq record (garbage the broker reclaims).
func TestSelectAllSmallMessages(t *testing.T) {
	for _, ds := range []struct {
		fixture, name, node, small string
	}{
		{"rabbitmq", "crash-cqv2", "rmqfix@localhost", "queue-store"},
		{"rabbitmq", "crash", "rmqfix@localhost", "embedded"},
		{"rabbitmq-4.0", "crash", "rmq40@localhost", "queue-store"},
	} {
		name := ds.fixture + "/" + ds.name
		var dump []dumpLine
		jsonLines(t, testutil.Testdata(ds.fixture, "results", ds.name, "restart", "dump.jsonl"), func(d dumpLine) { dump = append(dump, d) })
		root := testutil.Untar(t, testutil.Testdata(ds.fixture, "datasets", ds.name+".tar.gz"))
		vdir := filepath.Join(root, ds.node, "msg_stores", "vhosts", vhostHash)
		_, msgs, out := exportRabbit(t, root, vdir, Options{Select: []Selection{SelectAll}})
		type key struct{ mid, sha string }
		byKey := map[key]*Message{}
		ids := map[string]bool{}
		for i := range msgs {
			m := &msgs[i]
			if ids[m.MsgID] {
				t.Errorf("%s: msg id %s exported twice", name, m.MsgID)
			}
			ids[m.MsgID] = true
			body, err := ReadBody(out, m)
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprintf("%x", sha256.Sum256(body)) != m.SHA256 {
				t.Fatalf("%s: %s: body sha256 differs from the manifest", name, m.MsgID)
			}
			mid, _ := m.Properties["message_id"].(string)
			byKey[key{mid, m.SHA256}] = m
		}
		delivered := map[*Message][]string{}
		small := map[string]bool{}
		for _, d := range dump {
			m := byKey[key{d.MessageID, d.SHA256}]
			if m == nil {
				t.Errorf("%s: delivered %s (%s, %d bytes) not exported", name, d.MessageID, d.Queue, d.Size)
				continue
			}
			delivered[m] = append(delivered[m], d.Queue)
			if m.Location == ds.small {
				small[d.MessageID] = true
			}
		}
		for i := range msgs {
			m := &msgs[i]
			qs := delivered[m]
			if qs == nil {
				if m.Status != rscan.StatusUnreferenced {
					t.Errorf("%s: exported %s (%s, %s@%d, %s) but the broker never delivered it", name, m.MsgID, m.Location, m.Path, m.Offset, m.Status)
				}
				continue
			}
			sort.Strings(qs)
			got := append([]string(nil), m.Queues...)
			sort.Strings(got)
			if strings.Join(got, ",") != strings.Join(qs, ",") {
				t.Errorf("%s: %s: queues %v, the broker delivered it from %v", name, m.MsgID, got, qs)
			}
			if m.Location == ds.small && (m.Exchange == nil || *m.Exchange != "fx.direct" || len(m.RoutingKeys) == 0 || len(m.PropertiesBin) == 0) {
				t.Errorf("%s: small message %s lacks exchange/routing/properties: %+v", name, m.MsgID, m)
			}
		}
		if len(small) == 0 {
			t.Errorf("%s: no %s message among the deliveries", name, ds.small)
		}
		t.Logf("%s: %d deliveries (%d messages) matched by message id and sha256, %d of them %s; %d exported in all",
			name, len(dump), len(delivered), len(small), ds.small, len(msgs))
	}
}

// TestSelectLostQueueStore: a .qs entry whose CRC fails is dropped by
// the broker at recovery; --select lost exports it when its body still
// decodes (payload byte flipped: the flipped payload, saying why) and
// skips it with a note when it does not (ETF magic flipped).
func TestSelectLostQueueStore(t *testing.T) {
	root := testutil.Untar(t, testutil.Testdata("rabbitmq", "datasets", "crash-cqv2.tar.gz"))
	vdir := filepath.Join(root, "rmqfix@localhost", "msg_stores", "vhosts", vhostHash)
	_, msgs, out := exportRabbit(t, root, vdir, Options{Select: []Selection{SelectAll}})
	var small []Message
	for _, m := range msgs {
		if m.Location == "queue-store" {
			small = append(small, m)
		}
	}
	if len(small) < 2 {
		t.Fatalf("%d queue-store messages", len(small))
	}
	rep, lost, _ := exportRabbit(t, root, vdir, Options{Select: []Selection{SelectLost}})
	if len(lost) != 0 || rep.Skipped != 0 {
		t.Fatalf("intact dataset: lost exports %d, skips %d", len(lost), rep.Skipped)
	}
	corrupt := func(m Message, flip func(blob, payload []byte) int) {
		p := filepath.Join(root, filepath.FromSlash(m.Path))
		b := mustRead(t, p)
		body, err := ReadBody(out, &m)
		if err != nil {
			t.Fatal(err)
		}
		blob := b[m.Offset+8 : m.Offset+m.RecordSize]
		blob[flip(blob, body)] ^= 0x01
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	good, bad := small[0], small[1]
	var want []byte
	corrupt(good, func(blob, payload []byte) int {
		i := bytes.Index(blob, payload)
		if i < 0 {
			t.Fatal("payload not inside the .qs blob")
		}
		want = append([]byte(nil), payload...)
		want[0] ^= 0x01
		return i
	})
	corrupt(bad, func(blob, _ []byte) int { return 0 })
	rep, lost, out2 := exportRabbit(t, root, vdir, Options{Select: []Selection{SelectLost}})
	if len(lost) != 1 || rep.Skipped != 1 {
		t.Fatalf("lost: %d exported (want 1), %d skipped (want 1): %+v", len(lost), rep.Skipped, rep.Notes)
	}
	m := lost[0]
	body, err := ReadBody(out2, &m)
	if err != nil {
		t.Fatal(err)
	}
	if m.MsgID != good.MsgID || !bytes.Equal(body, want) || m.Status != "dropped at recovery: bad_crc" ||
		len(m.Why) != 1 || !strings.Contains(m.Why[0], "still decodes") {
		t.Errorf("lost: %+v", m)
	}
	if !strings.Contains(strings.Join(rep.Notes, "\n"), "not exported") {
		t.Errorf("no note for the undecodable entry: %v", rep.Notes)
	}
	t.Logf("lost: CRC-broken .qs entry %s exported (body still decodes), the undecodable one skipped with a note", m.MsgID)
}

// jsonLines decodes every non-empty line of a jsonl file into fn's argument.
func jsonLines[T any](t *testing.T, path string, fn func(T)) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for i, line := range bytes.Split(b, []byte("\n")) {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var v T
		if err := json.Unmarshal(line, &v); err != nil {
			t.Fatalf("%s:%d: %v", path, i+1, err)
		}
		fn(v)
	}
}

// FuzzQueueMessage: any bytes as the body of a queue-store or embedded
// entry, readable or lost, either decode into a message whose payload is
// inside the input or fail with an error, never a panic. Seeds: the .qs
// blobs and embedded terms of the 3.10.8 crash datasets.
func FuzzQueueMessage(f *testing.F) {
	for _, ds := range []string{"crash-cqv2", "crash"} {
		root := testutil.Untar(f, testutil.Testdata("rabbitmq", "datasets", ds+".tar.gz"))
		q, err := rscan.ReadVHostQueues(filepath.Join(root, "rmqfix@localhost", "msg_stores", "vhosts", vhostHash))
		if err != nil {
			f.Fatal(err)
		}
		n := 0
		for _, qd := range q.Queues {
			for _, e := range qd.Entries {
				if len(e.Body) > 0 && n < 3 {
					f.Add(append([]byte(nil), e.Body...), e.Location == rscan.LocationEmbedded, false)
					n++
				}
			}
		}
	}
	f.Add([]byte{}, false, true)
	f.Add([]byte{131, 104, 0}, true, false)
	f.Fuzz(func(t *testing.T, b []byte, embedded, lost bool) {
		e := rscan.QueueEntry{Location: rscan.LocationQueueStore, Body: b, StorePath: filepath.Join(t.TempDir(), "0.qs"),
			Path: "0.qi", StoreSize: uint32(len(b))}
		if embedded {
			e.Location, e.Path = rscan.LocationEmbedded, "0.idx"
		}
		m, body, err := queueMessage("/", &rscan.VHostScan{VHost: "/"}, &e, lost)
		if err != nil {
			return
		}
		if int64(len(body)) > int64(len(b)) || m.Location != e.Location.String() {
			t.Fatalf("payload of %d bytes from a %d-byte body, location %q", len(body), len(b), m.Location)
		}
	})
}
