package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/storectl/storectl/internal/testutil"
)

// TestRabbitCleanDumpsAgainstUnread: after a clean shutdown scan and verify check
// msg_store_index.ets and file_summary.ets against the .rdq files and
// the queue indexes; what it could not read it cannot check them
// against. On clean-shutdown (no index finding undamaged):
//   - 10.rdq a directory: its index entries were "offset/size does not
//     hold its record" (scan: "does not point at its record") and its summary "valid total size ..., but the
//     records queues reference add up to 0";
//   - a queue's 0.idx a directory: every entry's ref count was compared
//     with the references of the queues that could be read ("ref count 2,
//     but the queue indexes hold 1 references");
//   - a queue's .queue_name a directory: the dir was an orphan ("no
//     readable .queue_name ... the broker deletes dirs of unknown
//     queues"); whose queue it is is unknown, as with a .queue_name that
//     cannot be opened: the queue is unreadable.
//
// Each time verify says once (rabbitmq.index.unknown, waiting on the
// file) which of the dumps' checks it did not make.
func TestRabbitCleanDumpsAgainstUnread(t *testing.T) {
	const vhost = "msg_stores/vhosts/628WB79CIFDYO9LJI6DKMI09L"
	node := func(t *testing.T) string {
		return filepath.Join(testutil.Untar(t, testutil.Testdata("rabbitmq", "datasets", "clean-shutdown.tar.gz")), "rmqfix@localhost")
	}
	verify := func(t *testing.T, n string, want int) []map[string]any {
		var objs []map[string]any
		for _, cmd := range []string{"scan", "verify"} {
			code, out, errOut := runCLI(t, cmd, n, "-o", "jsonl")
			if code != want {
				t.Fatalf("%s: exit %d, want %d\n%s\n%s", cmd, code, want, out, errOut)
			}
			objs = append(objs, jsonlObjects(t, out)...)
		}
		return objs
	}
	for _, o := range verify(t, node(t), exitOK) {
		if c, _ := o["code"].(string); strings.HasPrefix(c, "rabbitmq.index.") || c == "rabbitmq.queue.orphan" {
			t.Fatalf("undamaged: %v", o)
		}
	}
	queueDir := func(t *testing.T, n string) string {
		ents, err := os.ReadDir(filepath.Join(n, vhost, "queues"))
		if err != nil || len(ents) == 0 {
			t.Fatalf("fixture: no queue dirs: %v", err)
		}
		return vhost + "/queues/" + ents[0].Name()
	}
	for _, c := range []struct {
		name string
		rel  func(t *testing.T, n string) string
		code string // the unreadable finding
	}{
		{"rdq", func(*testing.T, string) string { return vhost + "/msg_store_persistent/10.rdq" }, "rabbitmq.rdq.unreadable"},
		{"queue-index", func(t *testing.T, n string) string { return queueDir(t, n) + "/0.idx" }, "rabbitmq.queue.unreadable"},
		{"queue-name", func(t *testing.T, n string) string { return queueDir(t, n) + "/.queue_name" }, "rabbitmq.queue.unreadable"},
	} {
		t.Run(c.name, func(t *testing.T) {
			n := node(t)
			rel := c.rel(t, n)
			p := filepath.Join(n, filepath.FromSlash(rel))
			dirInPlace(t, p)
			named, skipped := false, 0
			for _, o := range verify(t, n, exitIncomplete) {
				code, _ := o["code"].(string)
				switch {
				case code == "rabbitmq.index.unknown":
					// The checks not made say what they wait on (verify only).
					d, _ := o["details"].(map[string]any)
					if w, _ := d["waits_on"].([]any); !slices.Contains(w, any(rel)) || o["severity"] != "warning" {
						t.Errorf("index.unknown does not wait on %s: %v", rel, o)
					}
					skipped++
				case strings.HasPrefix(code, "rabbitmq.index.") || code == "rabbitmq.queue.orphan":
					t.Errorf("drawn from %s, which could not be read: %v", rel, o)
				case code == c.code:
					named = true
				}
			}
			if !named || skipped != 1 {
				t.Errorf("%s: %s named %v, index.unknown %d times (want once)", rel, c.code, named, skipped)
			}
		})
	}
}
