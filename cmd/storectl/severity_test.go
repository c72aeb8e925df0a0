package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/storectl/storectl/internal/testutil"
)

// TestSeverityBrokerRepairs: what the broker's own start repairs is info,
// so a normal crash does not fail the nightly verify. A consume queue one
// unit behind the commitlog after a crash (its newest unit not written,
// the abort file left) is re-dispatched at the next start: verify of the
// a-clean store with the store's newest unit zeroed and an abort file
// exits 0 with the record reported not-dispatched at info.
func TestSeverityBrokerRepairs(t *testing.T) {
	store := filepath.Join(testutil.Untar(t, testutil.Testdata("rocketmq", "rmq533-a-clean.tar.gz")), "store")
	// The unit with the highest commitlog offset: the last record written.
	newest := newestCQUnit(t, store)
	clearCQUnit(t, newest)
	max := newest.off
	if err := os.WriteFile(filepath.Join(store, "abort"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runCLI(t, "verify", store, "-o", "jsonl")
	if code != exitOK {
		t.Fatalf("verify of a consume queue one unit behind after a crash: exit %d, want 0\n%s\n%s", code, out, errOut)
	}
	n := 0
	for _, o := range jsonlObjects(t, out) {
		if o["code"] == "rocketmq.consumequeue.missing" {
			d := o["details"].(map[string]any)
			if o["severity"] != "info" || d["state"] != "not-dispatched" || int64(d["phy_offset"].(float64)) != max {
				t.Fatalf("the undispatched record: %v", o)
			}
			n++
		}
	}
	if n != 1 {
		t.Fatalf("%d consumequeue.missing findings, want 1 (phy %d)", n, max)
	}
}

// TestSeverityUnconfirmed: after an unclean stop, queue index entries
// whose message no store file holds, at the tail of their queue's
// writes, are publishes never confirmed: message-missing at info with
// state unconfirmed, and the queue line counts them in unconfirmed (part
// of drop). Checked against crash-mid-write-confirmed's oracles: the
// broker's restart kept exactly keep messages per queue, and no confirmed
// message went missing.
func TestSeverityUnconfirmed(t *testing.T) {
	var an struct {
		Kept             map[string]int `json:"broker_list_queues_after_restart"`
		ConfirmedMissing int            `json:"flood_confirmed_missing_after_restart"`
	}
	b, err := os.ReadFile(testutil.Testdata("rabbitmq", "results", "crash-mid-write-confirmed", "analysis.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &an); err != nil || len(an.Kept) == 0 || an.ConfirmedMissing != 0 {
		t.Fatalf("oracle: %+v %v", an, err)
	}
	node := filepath.Join(testutil.Untar(t, testutil.Testdata("rabbitmq", "datasets", "crash-mid-write-confirmed.tar.gz")), "rmqfix@localhost")
	_, out, _ := runCLI(t, "verify", node, "-o", "jsonl")
	missing, unconfirmed := 0, 0
	for _, o := range jsonlObjects(t, out) {
		switch {
		case o["code"] == "rabbitmq.queue.message-missing":
			if o["severity"] != "info" || o["details"].(map[string]any)["state"] != "unconfirmed" {
				t.Fatalf("an unconfirmed publish called lost: %v", o)
			}
			missing++
		case o["type"] == "queue":
			q := o["queue"].(string)
			entries, keep, drop, unc := int(o["entries"].(float64)), int(o["keep"].(float64)), int(o["drop"].(float64)), int(o["unconfirmed"].(float64))
			if keep != an.Kept[q] || drop != entries-an.Kept[q] || unc != drop {
				t.Fatalf("queue %s: entries %d keep %d drop %d unconfirmed %d; the broker kept %d", q, entries, keep, drop, unc, an.Kept[q])
			}
			unconfirmed += unc
		}
	}
	if missing == 0 || missing != unconfirmed {
		t.Fatalf("%d message-missing findings, %d unconfirmed in the queue lines", missing, unconfirmed)
	}
}
