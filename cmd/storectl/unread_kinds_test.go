package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
)

// TestNotAFileIsUnread: a dir, and separately a named pipe, where a store
// keeps one of its files is data the command cannot read, not data that
// is gone (docs/cli.md, "Unknown is not lost"): every command that reads
// that kind of file exits 3 (incomplete), an error finding names the file
// (rocketmq/storectl.file.unreadable or the kind's own *.unreadable), and
// no missing/drop/gap/beyond-end finding appears that the same command
// does not report on the intact fixture. Each kind's fixture is a bundled
// one, unpacked into a temp dir; storectl runs as a child process with a
// deadline (sub.run), so an open that blocks on the pipe fails the test.
// Before: a FIFO commitlog file was exit 1 (offset-gap), a FIFO or dir
// .rdq was message-missing, a dir commitlog, CQ, index or queue index
// file was exit 0 or 1, a DLedger data file dropped-entries, a stream
// index index-missing, a quorum segment log-gap.
func TestNotAFileIsUnread(t *testing.T) {
	const vhost = "msg_stores/vhosts/628WB79CIFDYO9LJI6DKMI09L" // relative to the node dir
	all := []string{"scan", "verify", "salvage"}
	cases := []struct {
		kind, fixture, data, file string
		cmds                      []string // the commands that read this kind of file
	}{
		{"rocketmq commitlog", "rocketmq/rmq533-a-clean.tar.gz", "store", "commitlog/00000000000000262144", all},
		{"rocketmq consumequeue", "rocketmq/rmq533-a-clean.tar.gz", "store", "consumequeue/TopicA/0/00000000000000000000", []string{"verify", "salvage"}},
		{"rocketmq index", "rocketmq/rmq533-a-clean.tar.gz", "store", "index/20261129234807661", []string{"verify"}},
		{"rocketmq checkpoint", "rocketmq/rmq533-a-clean.tar.gz", "store", "checkpoint", []string{"verify"}},
		{"rocketmq config json", "rocketmq/rmq497-a-clean.tar.gz", "store", "config/delayOffset.json", []string{"verify"}},
		{"dledger data", "rocketmq-5x/rmq533-dl1-clean.tar.gz", "store", "dledger-n0/data/00000000000000262144", all},
		{"dledger index", "rocketmq-5x/rmq533-dl1-clean.tar.gz", "store", "dledger-n0/index/00000000000000000000", all},
		{"dledger consumequeue", "rocketmq-5x/rmq533-dl1-clean.tar.gz", "store", "consumequeue/TopicA/0/00000000000000000000", all},
		{"rabbitmq .rdq", "rabbitmq/datasets/crash.tar.gz", "rmqfix@localhost", vhost + "/msg_store_persistent/18.rdq", all},
		{"rabbitmq v1 queue index", "rabbitmq/datasets/crash.tar.gz", "rmqfix@localhost", vhost + "/queues/BBLAWLQ242Q038SS4SQ12H88L/0.idx", all},
		{"rabbitmq v2 queue index", "rabbitmq-4.0/datasets/crash.tar.gz", "rmq40@localhost", vhost + "/queues/BBLAWLQ242Q038SS4SQ12H88L/0.qi", all},
		{"stream segment", "rabbitmq-4.0-qq-stream/datasets/S1.tar.gz", "rmq40@localhost", "stream/__s1a_1796159969530842441/00000000000000000403.segment", all},
		{"stream index", "rabbitmq-4.0-qq-stream/datasets/S1.tar.gz", "rmq40@localhost", "stream/__s1a_1796159969530842441/00000000000000000403.index", all},
		{"quorum wal", "rabbitmq-4.0-qq-stream/datasets/Q1.tar.gz", "rmq40@localhost", "quorum/rmq40@localhost/00000021.wal", all},
		{"quorum segment", "rabbitmq-4.0-qq-stream/datasets/Q1.tar.gz", "rmq40@localhost", "quorum/rmq40@localhost/2F_QQ109LB4B9AV3QD/00000010.segment", all},
	}
	// A conclusion drawn from a file's absence.
	absence := regexp.MustCompile(`missing|drop|beyond|gap|no-record|truncated|recovery-exit|lost`)
	var mu sync.Mutex
	base := map[string]map[string]bool{} // fixture+command -> code/path of the intact run's findings
	intact := func(t *testing.T, fixtureTgz, data, cmd string) map[string]bool {
		mu.Lock()
		defer mu.Unlock()
		k := fixtureTgz + " " + cmd
		if m, ok := base[k]; ok {
			return m
		}
		dir := fixture(t, fixtureTgz)
		_, out, _ := sub{}.run(t, cmdArgs(t, cmd, filepath.Join(dir, data))...)
		m := map[string]bool{}
		for _, o := range jsonlObjects(t, out) {
			if o["type"] == "finding" {
				m[o["code"].(string)+" "+o["path"].(string)] = true
			}
		}
		base[k] = m
		return m
	}
	for _, c := range cases {
		for _, how := range []string{"fifo", "dir"} {
			t.Run(c.kind+"/"+how, func(t *testing.T) {
				t.Parallel() // children with a deadline each: the cases overlap
				dir := fixture(t, c.fixture)
				p := filepath.Join(dir, c.data, filepath.FromSlash(c.file))
				if _, err := os.Stat(p); err != nil {
					t.Fatalf("the fixture has no %s: %v", c.file, err)
				}
				if how == "fifo" {
					mkfifo(t, p)
				} else {
					dirInPlace(t, p)
				}
				for _, cmd := range c.cmds {
					code, out, errOut := sub{}.run(t, cmdArgs(t, cmd, filepath.Join(dir, c.data))...)
					sum := summaryOf(t, code, out)
					if code != exitIncomplete || sum["incomplete"] != true {
						t.Errorf("%s: exit %d, want 3 (incomplete)\n%s%s", cmd, code, tail(out), errOut)
					}
					named := false
					was := intact(t, c.fixture, c.data, cmd)
					told := map[string]bool{}
					for _, o := range jsonlObjects(t, out) {
						if o["type"] != "finding" {
							continue
						}
						code, path := o["code"].(string), o["path"].(string)
						if path == c.file && o["severity"] == "error" && strings.HasSuffix(code, ".unreadable") {
							named = true
						}
						if absence.MatchString(code) && !was[code+" "+path] && !told[code+" "+path] {
							told[code+" "+path] = true
							t.Errorf("%s: a conclusion from the unread %s: %s at %s: %v", cmd, c.file, code, path, o["message"])
						}
					}
					if !named {
						t.Errorf("%s: no error *.unreadable finding names %s\n%s", cmd, c.file, tail(out))
					}
				}
			})
		}
	}
}

// cmdArgs is cmd's argv for a JSONL run on data (salvage: into a fresh
// --out dir).
func cmdArgs(t *testing.T, cmd, data string) []string {
	args := []string{cmd, "-o", "jsonl"}
	if cmd == "salvage" {
		args = append(args, "--out", filepath.Join(t.TempDir(), "out"))
	}
	return append(args, data)
}
