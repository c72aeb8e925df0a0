package rocketmq

import (
	"context"
	"fmt"
	"testing"

	genrmq "github.com/storectl/storectl/internal/gen/rocketmq"
	"github.com/storectl/storectl/internal/testutil"
	rmq "github.com/storectl/storectl/pkg/format/rocketmq"
	"github.com/storectl/storectl/pkg/scan"
)

// TestGeneratedStoreShape: the benchmark generator's store looks like a
// real one (issue 7): several topics and queues, bodies from 0 to 20000
// bytes, messages with and without keys and tags, IPv4 and IPv6 hosts,
// every full commitlog file ending in a BLANK record; and the same seed
// gives the same store.
func TestGeneratedStoreShape(t *testing.T) {
	gen := func() (string, *genrmq.Summary) {
		root := t.TempDir()
		sum, err := genrmq.Generate(root, genrmq.Config{MappedFileSize: 1 << 20, TotalBytes: 6 << 20, Seed: 11})
		if err != nil {
			t.Fatal(err)
		}
		return root, sum
	}
	root, sum := gen()
	topics, queues := map[string]bool{}, map[string]bool{}
	minBody, maxBody := 1<<30, -1
	keys, noKeys, tags, noTags, v6, v4 := 0, 0, 0, 0, 0, 0
	res, err := ScanCommitLog(context.Background(), Config{Root: root, OnMessage: func(m *rmq.Message, _ int64) error {
		topics[string(m.Topic)] = true
		queues[fmt.Sprint(string(m.Topic), "/", m.QueueID)] = true
		minBody, maxBody = min(minBody, len(m.Body)), max(maxBody, len(m.Body))
		if m.Keys() != "" {
			keys++
		} else {
			noKeys++
		}
		if m.Tags() != "" {
			tags++
		} else {
			noTags++
		}
		for _, h := range []rmq.Host{m.BornHost, m.StoreHost} {
			if h.Addr.Is6() {
				v6++
			} else {
				v4++
			}
		}
		return nil
	}}, scan.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(topics) < 4 || len(queues) < 6 || minBody != 0 || maxBody != 20000 || keys == 0 || noKeys == 0 ||
		tags == 0 || noTags == 0 || v6 == 0 || v4 == 0 {
		t.Errorf("%d topics, %d queues, bodies %d-%d, keys %d/%d, tags %d/%d, hosts v6 %d v4 %d",
			len(topics), len(queues), minBody, maxBody, keys, noKeys, tags, noTags, v6, v4)
	}
	for i, f := range res.Files {
		if i < len(res.Files)-1 && f.End != scan.EndBlank {
			t.Errorf("%s ends %q, want blank", f.Path, f.End)
		}
	}
	if len(res.Files) < 5 || sum.Messages == 0 {
		t.Fatalf("%d files, %d messages", len(res.Files), sum.Messages)
	}
	root2, _ := gen()
	testutil.SameTree(t, testutil.TreeHash(t, root), testutil.TreeHash(t, root2)) // same seed, same bytes
	t.Logf("%d messages in %d files: %d topics, %d queues, bodies %d-%d, keys on %d, tags on %d, %d IPv6 hosts",
		sum.Messages, len(res.Files), len(topics), len(queues), minBody, maxBody, keys, tags, v6)
}
