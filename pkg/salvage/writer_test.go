package salvage

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	gen "github.com/storectl/storectl/internal/gen/rabbitmq"
	"github.com/storectl/storectl/internal/testutil"
	rscan "github.com/storectl/storectl/pkg/scan/rabbitmq"
)

// crashConfirmed unpacks crash-mid-write-confirmed (once per test) and
// returns its node dir and vhost dir.
func crashConfirmed(t testing.TB) (string, string) {
	t.Helper()
	root := filepath.Join(testutil.Untar(t, testutil.Testdata("rabbitmq", "datasets", "crash-mid-write-confirmed.tar.gz")), "rmqfix@localhost")
	vdirs, _ := filepath.Glob(filepath.Join(root, "msg_stores", "vhosts", "*"))
	if len(vdirs) != 1 {
		t.Fatalf("vhost dirs %v", vdirs)
	}
	return root, vdirs[0]
}

// crashOracle is what the fixture's analysis.json says the store holds.
func crashOracle(t testing.TB) (records, embedded int, queues map[string]int) {
	t.Helper()
	b, err := os.ReadFile(testutil.Testdata("rabbitmq", "results", "crash-mid-write-confirmed", "analysis.json"))
	if err != nil {
		t.Fatal(err)
	}
	var a map[string]any
	if err := json.Unmarshal(b, &a); err != nil {
		t.Fatal(err)
	}
	queues = map[string]int{}
	for q, n := range a["broker_list_queues_after_restart"].(map[string]any) {
		queues[q] = int(n.(float64))
	}
	return int(a["records_scanned"].(float64)), int(a["present_messages_embedded_in_queue_index(no .rdq record)"].(float64)), queues
}

func export(t testing.TB, root, vdir, out string, o Options, spec Spec, filter *Filter) (*Report, Stats) {
	t.Helper()
	spec.DataDir = root
	w, err := CreateExport(out, spec)
	if err != nil {
		t.Fatal(err)
	}
	if !filter.Empty() {
		w.Filter = filter.Match
	}
	rep, err := ExportRabbitMQ(context.Background(), rscan.Config{Root: root, VHostDirs: []string{vdir}}, o, w)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return rep, w.Stats()
}

// TestExportAllSyncsInBatches: --select all of crash-mid-write-confirmed
// exports every record the broker's own scan found plus the messages
// embedded in its queue indexes (analysis.json: 2,253 + 8), every body
// intact, with a handful of syncs (counted by the hook) instead of one
// per message, and export.json marked complete.
func TestExportAllSyncsInBatches(t *testing.T) {
	root, vdir := crashConfirmed(t)
	records, embedded, _ := crashOracle(t)
	kinds := map[string]int{}
	syncHook = func(k string) { kinds[k]++ }
	defer func() { syncHook = nil }()
	out := filepath.Join(t.TempDir(), "out")
	rep, st := export(t, root, vdir, out, Options{Select: []Selection{SelectAll}}, Spec{Store: StoreRabbitMQ, Select: []Selection{SelectAll}}, nil)
	syncHook = nil
	msgs, err := ReadMessages(out)
	if err != nil {
		t.Fatal(err)
	}
	if want := records + embedded; rep.Selected != want || len(msgs) != want || st.Written != want {
		t.Fatalf("exported %d (manifest %d, written %d), the oracle has %d + %d", rep.Selected, len(msgs), st.Written, records, embedded)
	}
	for i := range msgs {
		if _, err := ReadBody(out, &msgs[i]); err != nil {
			t.Fatal(err)
		}
	}
	syncs := kinds["syncfs"] + kinds["file"] + kinds["dir"]
	if syncs != st.Syncs || syncs*100 > len(msgs) || kinds["syncfs"] != (len(msgs)+syncEvery-1)/syncEvery {
		t.Fatalf("%d syncs (%v) for %d messages", syncs, kinds, len(msgs))
	}
	spec, err := readSpec(out)
	if err != nil || !spec.Complete {
		t.Fatalf("export.json: %+v %v", spec, err)
	}
	t.Logf("%d messages, %d syncs (%v)", len(msgs), syncs, kinds)
	t.Run("resume", func(t *testing.T) { testResume(t, root, vdir, out) })
}

// testResume (of TestExportAllSyncsInBatches, sharing its export full):
// an export cut short (its manifest cut
// after 1000 lines plus half a line, as a crash leaves it) is resumed by
// the same command: only the missing messages are written, and the result
// is line for line the uninterrupted export; a complete export run again
// writes nothing. Another selection, or a dir that holds other files, is
// refused.
func testResume(t *testing.T, root, vdir, full string) {
	o := Options{Select: []Selection{SelectAll}}
	spec := Spec{Store: StoreRabbitMQ, Select: o.Select}
	want, err := os.ReadFile(filepath.Join(full, MessagesFile))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(string(want), "\n")
	n := len(lines) - 1 // the last element is empty

	out := filepath.Join(t.TempDir(), "out")
	if err := os.CopyFS(out, os.DirFS(full)); err != nil {
		t.Fatal(err)
	}
	const kept = 1000
	cut := strings.Join(lines[:kept], "") + lines[kept][:len(lines[kept])/2]
	if err := os.WriteFile(filepath.Join(out, MessagesFile), []byte(cut), 0o644); err != nil {
		t.Fatal(err)
	}
	s := spec
	s.DataDir, _ = realAbs(root)
	if err := writeSpec(out, s); err != nil { // not complete
		t.Fatal(err)
	}
	rep, st := export(t, root, vdir, out, o, spec, nil)
	got, _ := os.ReadFile(filepath.Join(out, MessagesFile))
	if st.Written != n-kept || st.Resumed != kept || rep.Selected != n || string(got) != string(want) {
		t.Fatalf("resume: written %d resumed %d selected %d of %d; manifest same: %v", st.Written, st.Resumed, rep.Selected, n, string(got) == string(want))
	}
	_, st = export(t, root, vdir, out, o, spec, nil)
	if st.Written != 0 || st.Resumed != n {
		t.Fatalf("complete export run again: written %d resumed %d", st.Written, st.Resumed)
	}
	if _, err := CreateExport(out, Spec{DataDir: root, Store: StoreRabbitMQ, Select: []Selection{SelectLost}}); !errors.Is(err, ErrOtherExport) {
		t.Fatalf("other selection: %v", err)
	}
	other := t.TempDir()
	os.WriteFile(filepath.Join(other, "notes.txt"), []byte("x"), 0o644)
	if _, err := CreateExport(other, Spec{DataDir: root}); !errors.Is(err, ErrOutNotEmpty) {
		t.Fatalf("dir with other files: %v", err)
	}
}

// TestFilterByQueue: --queue q4 exports exactly the messages the broker
// listed in q4 after its restart (analysis.json).
func TestFilterByQueue(t *testing.T) {
	root, vdir := crashConfirmed(t)
	_, _, queues := crashOracle(t)
	for q, n := range queues {
		if q != "q4" { // the smallest: one queue shows it, each costs an export
			continue
		}
		f := &Filter{Queues: []string{q}, Time: TimePublish}
		out := filepath.Join(t.TempDir(), "out")
		rep, st := export(t, root, vdir, out, Options{Select: []Selection{SelectAll}}, Spec{Select: []Selection{SelectAll}, Filters: f.String()}, f)
		msgs, _ := ReadMessages(out)
		for _, m := range msgs {
			if !slices.Contains(m.Queues, q) {
				t.Fatalf("%s: exported %s of %v", q, m.MsgID, m.Queues)
			}
		}
		if len(msgs) != n || rep.Selected != n || st.Filtered == 0 {
			t.Errorf("--queue %s: %d messages, the broker had %d after restart (filtered %d)", q, len(msgs), n, st.Filtered)
		}
	}
}

// TestFilterMatch: topic[:queue id], message id (or UNIQ_KEY) and time
// windows on store and publish time.
func TestFilterMatch(t *testing.T) {
	qid := int32(3)
	m := &Message{Store: StoreRocketMQ, MsgID: "C0A8", Topic: "TopicA", QueueID: &qid, StoreTimestamp: 2000, BornTimestamp: 1000,
		Properties: map[string]any{"UNIQ_KEY": "7F00"}}
	at := func(ms int64) *time.Time { t := time.UnixMilli(ms); return &t }
	for _, c := range []struct {
		f    Filter
		want bool
	}{
		{Filter{Topics: []string{"TopicA"}}, true}, {Filter{Topics: []string{"TopicA:3"}}, true}, {Filter{Topics: []string{"TopicA:2"}}, false},
		{Filter{MsgIDs: []string{"c0a8"}}, true}, {Filter{MsgIDs: []string{"7F00"}}, true}, {Filter{MsgIDs: []string{"x"}}, false},
		{Filter{Since: at(2000), Time: TimeStore}, true}, {Filter{Until: at(2000), Time: TimeStore}, false},
		{Filter{Since: at(1500), Time: TimePublish}, false}, {Filter{Since: at(500), Until: at(1001), Time: TimePublish}, true},
	} {
		if got := c.f.Match(m); got != c.want {
			t.Errorf("%s: %v", c.f.String(), got)
		}
	}
	r := &Message{Store: StoreRabbitMQ, Properties: map[string]any{"timestamp": uint64(100)}}
	if !(&Filter{Since: at(100_000), Time: TimePublish}).Match(r) || (&Filter{Since: at(100_001), Time: TimePublish}).Match(r) ||
		(&Filter{Since: at(0), Time: TimePublish}).Match(&Message{Store: StoreRabbitMQ}) {
		t.Error("RabbitMQ publish time")
	}
}

// TestAtRiskWithoutVersionIsTheUnion: on the misread corpus, --select
// at-risk without --broker-version exports exactly the union of what it
// exports for each version at the ends of the scanner generations' ranges
// (ModeledVersions), and that union is not empty.
func TestAtRiskWithoutVersionIsTheUnion(t *testing.T) {
	total := 0
	for _, k := range corpus(t) {
		root := t.TempDir()
		vdir, _ := gen.WriteCorpusNode(t, root, k.Parts)
		_, none, _ := exportRabbit(t, root, vdir, Options{Select: []Selection{SelectAtRisk}})
		union := map[int64]bool{}
		for _, v := range ModeledVersions() {
			_, msgs, _ := exportRabbit(t, root, vdir, Options{Select: []Selection{SelectAtRisk}, BrokerVersions: []string{v}})
			for _, m := range msgs {
				union[m.Offset] = true
			}
		}
		got := map[int64]bool{}
		for _, m := range none {
			got[m.Offset] = true
		}
		if len(got) != len(union) {
			t.Errorf("%s: %d at-risk without a version, %d in the union over %v", k.Name, len(got), len(union), ModeledVersions())
		}
		for off := range union {
			if !got[off] {
				t.Errorf("%s: the record at %d is at risk for some version but not without one", k.Name, off)
			}
		}
		total += len(got)
	}
	if total == 0 {
		t.Fatal("nothing at risk over the corpus")
	}
}
