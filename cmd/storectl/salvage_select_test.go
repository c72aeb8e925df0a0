package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/storectl/storectl/internal/testutil"
)

// oracleLines reads a JSONL oracle file of the fixtures.
func oracleLines(t *testing.T, path string) []map[string]any {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []map[string]any
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		out = append(out, m)
	}
	return out
}

// exportedIDs runs salvage with args into a new out dir and returns the
// msg ids of its messages.jsonl, sorted, and the lines by id.
func exportedIDs(t *testing.T, args ...string) ([]string, map[string]map[string]any) {
	t.Helper()
	out := filepath.Join(t.TempDir(), "out")
	code, _, errOut := runCLI(t, append([]string{"salvage", "--out", out, "-o", "jsonl"}, args...)...)
	if code != exitOK && code != exitFindings {
		t.Fatalf("salvage %v: exit %d\n%s", args, code, errOut)
	}
	byID := map[string]map[string]any{}
	var ids []string
	for _, m := range oracleLines(t, filepath.Join(out, "messages.jsonl")) {
		id := m["msg_id"].(string)
		ids = append(ids, id)
		byID[id] = m
		m["out"] = out
	}
	sort.Strings(ids)
	return ids, byID
}

// TestSalvageSelectBy: --topic TOPIC:QUEUE, --msg-id and --since/--until
// on store and publish time export exactly the messages the oracle
// decoder's list of the RocketMQ 5.3.3 clean store (decode.jsonl, 300
// records) says match; --queue and --msg-id on the RabbitMQ 3.10.8
// mid-write crash export the restarted broker's count for q4 (547,
// analysis.json) and exactly the ids asked for from the broker-side scan
// (scan-decoded.jsonl), each body with the oracle's SHA-256.
func TestSalvageSelectBy(t *testing.T) {
	store := filepath.Join(testutil.Untar(t, testutil.Testdata("rocketmq", "rmq533-a-clean.tar.gz")), "store")
	var msgs []map[string]any
	for _, m := range oracleLines(t, testutil.Testdata("rocketmq", "rmq533-a-clean.decode.jsonl")) {
		if m["kind"] == "msg" {
			msgs = append(msgs, m)
		}
	}
	if len(msgs) != 300 {
		t.Fatalf("oracle: %d messages", len(msgs))
	}
	num := func(m map[string]any, k string) int64 { return int64(m[k].(float64)) }
	times := func(k string) []int64 {
		var ts []int64
		for _, m := range msgs {
			ts = append(ts, num(m, k))
		}
		slices.Sort(ts)
		return ts
	}
	st, bt := times("store_timestamp"), times("born_timestamp")
	pick := func(keep func(m map[string]any) bool) []string {
		var ids []string
		for _, m := range msgs {
			if keep(m) {
				ids = append(ids, m["msg_id"].(string))
			}
		}
		sort.Strings(ids)
		return ids
	}
	sinceS, untilS := st[50], st[120]
	sinceB, untilB := bt[200], bt[260]
	for _, c := range []struct {
		name string
		args []string
		want []string
	}{
		{"topic and queue", []string{"--topic", "TopicA:1"}, pick(func(m map[string]any) bool { return m["topic"] == "TopicA" && num(m, "queue_id") == 1 })},
		{"msg id, UNIQ_KEY, lower case", []string{"--msg-id", fmt.Sprintf("%s,%s,%s", msgs[5]["msg_id"], msgs[10]["uniq_key"], strings.ToLower(msgs[20]["msg_id"].(string)))},
			pick(func(m map[string]any) bool {
				return m["msg_id"] == msgs[5]["msg_id"] || m["msg_id"] == msgs[10]["msg_id"] || m["msg_id"] == msgs[20]["msg_id"]
			})},
		{"store time window", []string{"--since", fmt.Sprint(sinceS), "--until", fmt.Sprint(untilS), "--time", "store"},
			pick(func(m map[string]any) bool {
				return num(m, "store_timestamp") >= sinceS && num(m, "store_timestamp") < untilS
			})},
		{"publish time window", []string{"--since", fmt.Sprint(sinceB), "--until", fmt.Sprint(untilB), "--time", "publish"},
			pick(func(m map[string]any) bool {
				return num(m, "born_timestamp") >= sinceB && num(m, "born_timestamp") < untilB
			})},
	} {
		got, _ := exportedIDs(t, append([]string{store}, c.args...)...)
		if len(c.want) == 0 || len(c.want) == len(msgs) || !slices.Equal(got, c.want) {
			t.Errorf("%s %v: exported %d %v\nthe oracle says %d %v", c.name, c.args, len(got), got, len(c.want), c.want)
		}
	}

	node := filepath.Join(testutil.Untar(t, testutil.Testdata("rabbitmq", "datasets", "crash-mid-write-confirmed.tar.gz")), "rmqfix@localhost")
	res := testutil.Testdata("rabbitmq", "results", "crash-mid-write-confirmed")
	b, err := os.ReadFile(filepath.Join(res, "analysis.json"))
	if err != nil {
		t.Fatal(err)
	}
	var a struct {
		Queues map[string]int `json:"broker_list_queues_after_restart"`
	}
	if err := json.Unmarshal(b, &a); err != nil {
		t.Fatal(err)
	}
	got, byID := exportedIDs(t, node, "--queue", "q4")
	if len(got) != a.Queues["q4"] || a.Queues["q4"] == 0 {
		t.Errorf("--queue q4: %d messages, the restarted broker had %d", len(got), a.Queues["q4"])
	}
	for _, id := range got {
		if qs, _ := byID[id]["queues"].([]any); !slices.Contains(qs, any("q4")) {
			t.Fatalf("--queue q4 exported %s of %v", id, qs)
		}
	}
	scanned := oracleLines(t, filepath.Join(res, "scan-decoded.jsonl"))
	var want []string
	sha := map[string]any{}
	for _, i := range []int{0, 700, 2252} {
		id := scanned[i]["msg_id"].(string)
		want = append(want, id)
		sha[id] = scanned[i]["body_sha256"]
	}
	sort.Strings(want)
	got, byID = exportedIDs(t, node, "--msg-id", strings.Join(want, ","))
	if !slices.Equal(got, want) {
		t.Fatalf("--msg-id %v: exported %v", want, got)
	}
	for _, id := range got {
		if byID[id]["sha256"] != sha[id] {
			t.Errorf("%s: body sha256 %v, the broker-side scan %v", id, byID[id]["sha256"], sha[id])
		}
	}
}
