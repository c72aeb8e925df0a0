package rabbitmq

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// The workload oracle of the 3.10.8 datasets (testdata/rabbitmq/README.md,
// "Publisher and message scheme" and "Common workload").

// brokerSizes reads rdq-after-restart.tsv: persistent .rdq name -> size
// the restarted broker left.
func brokerSizes(t *testing.T, path string) map[string]int64 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		size, p, ok := strings.Cut(line, "\t")
		if !ok || !strings.Contains(p, "msg_store_persistent/") {
			continue
		}
		n, err := strconv.ParseInt(size, 10, 64)
		if err != nil {
			t.Fatalf("%s: %q: %v", path, line, err)
		}
		out[filepath.Base(p)] = n
	}
	return out
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err == nil {
		err = json.Unmarshal(b, v)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// storeThreshold is queue_index_embed_msgs_below (4096, stated in the
// fixtures' rabbitmq.conf): smaller messages live in the queue index, not
// in an .rdq.
const storeThreshold = 4096

// confirmedHeld returns the confirmed messages a queue still holds (AMQP
// id -> queues) that live in the shared store, and how many of them are
// flood messages: published and confirmed, minus the deleted queue, minus
// the acks of each queue; flood messages confirmed through the last
// confirmed_through, routed by the publisher's rule.
func confirmedHeld(t *testing.T, res string) (map[string][]string, int) {
	t.Helper()
	wl := filepath.Join(res, "workload")
	var deleted struct {
		Deleted string `json:"deleted"`
	}
	readJSON(t, filepath.Join(wl, "delete-q3.json"), &deleted)
	acked := map[string]bool{} // queue + "/" + id
	acks, _ := filepath.Glob(filepath.Join(wl, "ack-*.jsonl"))
	for _, f := range acks {
		jsonLines(t, f, func(a struct{ Acked, Queue string }) { acked[a.Queue+"/"+a.Acked] = true })
	}
	held := map[string][]string{}
	add := func(id string, queues []string) {
		for _, q := range queues {
			if q != deleted.Deleted && !acked[q+"/"+id] {
				held[id] = append(held[id], q)
			}
		}
	}
	pubs, _ := filepath.Glob(filepath.Join(wl, "publish-*.jsonl"))
	for _, f := range pubs {
		jsonLines(t, f, func(m struct {
			MessageID string   `json:"message_id"`
			Queues    []string `json:"queues"`
			Size      int      `json:"size"`
			Confirmed bool     `json:"confirmed"`
		}) {
			if m.Confirmed && m.Size >= storeThreshold {
				add(m.MessageID, m.Queues)
			}
		})
	}
	through := int64(-1)
	jsonLines(t, filepath.Join(wl, "flood.stdout"), func(c struct {
		ConfirmedThrough int64 `json:"confirmed_through"`
		AllAck           bool  `json:"all_ack"`
	}) {
		if c.AllAck {
			through = max(through, c.ConfirmedThrough)
		}
	})
	from := floodStart(t, filepath.Join(wl, "flood.stderr"))
	before := len(held)
	for seq := from; seq <= through; seq++ { // 20 000-byte bodies: all in the shared store
		add(fmt.Sprintf("m%06d", seq), route(seq))
	}
	if through < from || len(held) == before {
		t.Fatalf("no confirmed flood messages (from %d through %d)", from, through)
	}
	return held, len(held) - before
}

// floodStart reads the first "flood seq N" line.
func floodStart(t *testing.T, path string) int64 {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	if sc.Scan() {
		if n, err := strconv.ParseInt(strings.TrimPrefix(sc.Text(), "flood seq "), 10, 64); err == nil {
			return n
		}
	}
	t.Fatalf("%s: no flood start", path)
	return 0
}

// route is the publisher's routing: seq%5==0 -> shared12 (q1 and q2),
// otherwise key k<1+seq%4> -> q<1+seq%4>.
func route(seq int64) []string {
	if seq%5 == 0 {
		return []string{"q1", "q2"}
	}
	return []string{"q" + strconv.FormatInt(1+seq%4, 10)}
}

// amqpToStore maps AMQP message ids to store msg ids (scan-decoded.jsonl).
func amqpToStore(t *testing.T, path string) map[string]string {
	t.Helper()
	out := map[string]string{}
	jsonLines(t, path, func(r struct {
		MsgID string `json:"msg_id"`
		AMQP  string `json:"amqp_message_id"`
	}) {
		if r.AMQP != "" {
			out[r.AMQP] = r.MsgID
		}
	})
	return out
}
