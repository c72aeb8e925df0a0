package main

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/storectl/storectl/internal/testutil"
	"github.com/storectl/storectl/pkg/scan"
	"github.com/storectl/storectl/pkg/scan/rocketmq"
)

// readableTree unpacks a fixture where uid nobody can read it (tests run
// as root in CI: permission bits bite only on another user, see
// runAsNobody).
func readableTree(t *testing.T, tgz string) string {
	t.Helper()
	base, err := os.MkdirTemp("", "storectl-unknown-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	if err := testutil.UntarTo(tgz, base); err != nil {
		t.Fatal(err)
	}
	_ = filepath.Walk(base, func(p string, info os.FileInfo, err error) error {
		if err == nil && info.IsDir() {
			os.Chmod(p, 0o755)
		} else if err == nil {
			os.Chmod(p, 0o644)
		}
		return nil
	})
	return base
}

// onlyIn returns, per queue, how many references to messages held only
// by file (no other .rdq has a record with the id) a readable run's
// records show, and the file with the most of them when file is "".
func onlyIn(t *testing.T, dir string) (string, map[string]int) {
	t.Helper()
	code, out, errOut := runCLI(t, "scan", dir, "--records", "-o", "jsonl")
	if code != exitOK {
		t.Fatalf("scan of the readable tree: exit %d\n%s", code, errOut)
	}
	files := map[string][]string{} // msg id -> files with a record of it
	refs := map[string][]string{}  // msg id -> queues referencing it
	for _, o := range jsonlObjects(t, out) {
		if o["type"] != "record" || o["referenced_by"] == nil {
			continue
		}
		id := o["msg_id"].(string)
		files[id] = append(files[id], o["path"].(string))
		if len(refs[id]) == 0 {
			for _, q := range o["referenced_by"].([]any) {
				refs[id] = append(refs[id], q.(string))
			}
		}
	}
	per := map[string]map[string]int{}
	for id, fs := range files {
		if len(fs) != 1 || len(refs[id]) == 0 {
			continue
		}
		if per[fs[0]] == nil {
			per[fs[0]] = map[string]int{}
		}
		for _, q := range refs[id] {
			per[fs[0]][q]++
		}
	}
	best, n := "", 0
	var names []string
	for f := range per {
		names = append(names, f)
	}
	sort.Strings(names)
	for _, f := range names {
		m := 0
		for _, c := range per[f] {
			m += c
		}
		if m > n {
			best, n = f, m
		}
	}
	if best == "" {
		t.Fatal("no .rdq holds a referenced message of its own")
	}
	return best, per[best]
}

// TestUnreadableIsUnknown: an .rdq the user cannot read (run as nobody)
// or cannot read in full (larger than the scanner reads: a read that
// stops short) makes every conclusion that depends on it unknown, never
// lost: exit 3, no message-missing, and per queue an `unknown` count equal
// to the references to messages only that file holds (from a readable
// run's records), `drop` unchanged, `waits_on` naming the file; each
// message-unknown finding names it too. RabbitMQ 3.10.8 (v1 index) and
// 4.0.5 (v2 .qi) crash fixtures.
func TestUnreadableIsUnknown(t *testing.T) {
	for _, fx := range []struct{ name, tgz, node string }{
		{"3.10.8", testutil.Testdata("rabbitmq", "datasets", "crash.tar.gz"), "rmqfix@localhost"},
		{"4.0.5", testutil.Testdata("rabbitmq-4.0", "datasets", "crash.tar.gz"), "rmq40@localhost"},
	} {
		for _, how := range []string{"permission", "short read"} {
			t.Run(fx.name+"/"+how, func(t *testing.T) {
				node := filepath.Join(readableTree(t, fx.tgz), fx.node)
				_, before, _ := runCLI(t, "verify", node, "-o", "jsonl")
				drops := map[string]float64{}
				for _, o := range jsonlObjects(t, before) {
					if o["type"] == "queue" {
						drops[o["queue"].(string)] = o["drop"].(float64)
					}
				}
				file, want := onlyIn(t, node)
				abs := filepath.Join(node, filepath.FromSlash(file))
				run := runCLI
				if how == "permission" {
					if err := os.Chmod(abs, 0); err != nil {
						t.Fatal(err)
					}
					run = runAsNobody
				} else if err := os.Truncate(abs, 1<<30+1); err != nil { // sparse: the scanner reads up to 1 GiB
					t.Fatal(err)
				}
				for _, cmd := range []string{"verify", "scan"} {
					code, out, errOut := run(t, cmd, node, "-o", "jsonl")
					if code != exitIncomplete {
						t.Fatalf("%s: exit %d, want 3\n%s", cmd, code, errOut)
					}
					got := map[string]int{}
					for _, o := range jsonlObjects(t, out) {
						switch {
						case o["code"] == "rabbitmq.queue.message-missing":
							t.Fatalf("%s: message-missing for a message that may be in the unread %s: %v", cmd, file, o)
						case o["code"] == "rabbitmq.queue.message-unknown":
							w, _ := o["details"].(map[string]any)["waits_on"].([]any)
							if len(w) != 1 || w[0] != file || !strings.Contains(o["message"].(string), file) {
								t.Fatalf("%s: message-unknown does not name %s: %v", cmd, file, o)
							}
						case o["type"] == "queue":
							q := o["queue"].(string)
							got[q] = int(o["unknown"].(float64))
							if o["drop"].(float64) != drops[q] {
								t.Fatalf("queue %s: drop %v, %v when every file was read", q, o["drop"], drops[q])
							}
							if w, _ := o["waits_on"].([]any); got[q] > 0 && (len(w) != 1 || w[0] != file) {
								t.Fatalf("queue %s: waits_on %v, want [%s]", q, w, file)
							}
						}
					}
					if cmd == "verify" {
						for q := range drops {
							if got[q] != want[q] {
								b, _ := json.Marshal(got)
								t.Fatalf("unknown per queue %s, want %v (references to messages only %s holds)", b, want, file)
							}
						}
					}
				}
			})
		}
	}
}

// TestUnreadableCommitLogIsUnknown: a RocketMQ commitlog file nobody may
// read stops what storectl can see of the recovery, not the recovery:
// exit 3, no recovery_end, no beyond-end / beyond-recovery-end findings,
// and every consume queue unit pointing at or past the unread file is
// counted in a consumequeue.unknown finding naming it (the count taken from
// the consume queue files themselves).
func TestUnreadableCommitLogIsUnknown(t *testing.T) {
	store := filepath.Join(readableTree(t, testutil.Testdata("rocketmq", "rmq533-a-clean.tar.gz")), "store")
	const file = "commitlog/00000000000000262144"
	const base = 262144
	want := 0
	for _, u := range cqUnits(t, store) {
		if u.off >= base {
			want++
		}
	}
	if want == 0 {
		t.Fatal("no consume queue unit points past the file")
	}
	if err := os.Chmod(filepath.Join(store, filepath.FromSlash(file)), 0); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runAsNobody(t, "verify", store, "-o", "jsonl")
	if code != exitIncomplete {
		t.Fatalf("exit %d, want 3\n%s", code, errOut)
	}
	got := 0
	objs := jsonlObjects(t, out)
	for _, o := range objs {
		c, _ := o["code"].(string)
		switch {
		case strings.Contains(c, "beyond"):
			t.Fatalf("a conclusion from the unread file: %v", o)
		case strings.HasSuffix(c, ".unknown"):
			if w, _ := o["details"].(map[string]any)["waits_on"].([]any); len(w) != 1 || w[0] != file {
				t.Fatalf("%s does not wait on %s: %v", c, file, o)
			}
			if c == "rocketmq.consumequeue.unknown" {
				got += int(o["details"].(map[string]any)["units"].(float64))
			}
		}
	}
	if got != want {
		t.Fatalf("%d units unknown, the consume queues have %d pointing at or past %d", got, want, base)
	}
	if sum := objs[len(objs)-1]; sum["recovery_end"] != nil {
		t.Fatalf("summary recovery_end %v though %s was not read", sum["recovery_end"], file)
	}
}

// TestUnreadableQueueIndexIsUnknown: a queue index file nobody may read
// (4.0.5 v2 .qi, 3.10.8 v1 .idx) leaves that queue's entries unknown, not
// the vhost's verdict: exit 3, a queue.unreadable finding naming the file,
// the queue's line with unknown = the records no readable index
// references (each unreferenced finding waits on the file), every other
// queue's line as in a readable run, and no message-missing.
func TestUnreadableQueueIndexIsUnknown(t *testing.T) {
	for _, fx := range []struct{ tgz, node, file string }{
		{testutil.Testdata("rabbitmq-4.0", "datasets", "crash.tar.gz"), "rmq40@localhost", "0.qi"},
		{testutil.Testdata("rabbitmq", "datasets", "crash.tar.gz"), "rmqfix@localhost", "0.idx"},
	} {
		node := filepath.Join(readableTree(t, fx.tgz), fx.node)
		_, before, _ := runCLI(t, "verify", node, "-o", "jsonl")
		lines := map[string]string{}
		for _, o := range jsonlObjects(t, before) {
			if o["type"] == "queue" {
				lines[o["dir"].(string)] = fmt.Sprint(o["entries"], o["keep"], o["drop"], o["unknown"])
			}
		}
		idx, _ := filepath.Glob(filepath.Join(node, "msg_stores", "vhosts", "*", "queues", "*", fx.file))
		if len(idx) == 0 {
			t.Fatalf("%s: no %s", node, fx.file)
		}
		locked := idx[0]
		dir := filepath.Base(filepath.Dir(locked))
		rel, _ := filepath.Rel(node, locked)
		if err := os.Chmod(locked, 0); err != nil {
			t.Fatal(err)
		}
		code, out, errOut := runAsNobody(t, "verify", node, "-o", "jsonl")
		if code != exitIncomplete {
			t.Fatalf("%s: exit %d, want 3\n%s", fx.node, code, errOut)
		}
		unref, named := 0, false
		var line map[string]any
		for _, o := range jsonlObjects(t, out) {
			switch c, _ := o["code"].(string); {
			case c == "rabbitmq.queue.message-missing":
				t.Fatalf("message-missing with %s unread: %v", rel, o)
			case c == "rabbitmq.queue.unreadable":
				named = o["path"] == rel
			case c == "rabbitmq.rdq.unreferenced":
				if w, _ := o["details"].(map[string]any)["waits_on"].([]any); len(w) != 1 || w[0] != rel {
					t.Fatalf("unreferenced without waiting on %s: %v", rel, o)
				}
				n, _ := o["details"].(map[string]any)["records"].(float64)
				unref += int(n)
			case o["type"] == "queue" && o["dir"] == dir:
				line = o
			case o["type"] == "queue":
				if got := fmt.Sprint(o["entries"], o["keep"], o["drop"], o["unknown"]); got != lines[o["dir"].(string)] {
					t.Fatalf("queue %v: %s, readable run %s", o["queue"], got, lines[o["dir"].(string)])
				}
			}
		}
		if !named || line == nil || unref == 0 || int(line["unknown"].(float64)) != unref {
			t.Fatalf("%s: unreadable named %v, queue line %v, %d unreferenced", rel, named, line, unref)
		}
		if w, _ := line["waits_on"].([]any); len(w) != 1 || w[0] != rel {
			t.Fatalf("queue line waits_on %v, want [%s]", line["waits_on"], rel)
		}
	}
}

// TestUnreadableSalvageIsIncomplete: salvage of a data dir with a store
// file nobody may read cannot export what the file holds, and must not
// call it gone: exit 3 (not 0, "the export completed"), the file named in
// the summary's errors and in extra.salvage.unread, and no missing entry
// drawn from its absence. RabbitMQ classic (.rdq), RocketMQ (a commitlog
// file; --select lost too, whose units into the unread file are unknown,
// not missing), the 5.x DLedger log (a data file) and timer (the wheel,
// which lost needs), and quorum queues (a segment; verify is 3 as well).
// Each used to exit 0 or 1 with the unread file mentioned at most in a
// note.
func TestUnreadableSalvageIsIncomplete(t *testing.T) {
	outDir := func(t *testing.T) string { return filepath.Join(nobodyDir(t), "out") }
	check := func(t *testing.T, data, file string, args ...string) map[string]any {
		t.Helper()
		args = append(append([]string{"salvage"}, args...), "--out", outDir(t), "-o", "jsonl", data)
		code, out, errOut := runAsNobody(t, args...)
		if code != exitIncomplete {
			t.Fatalf("%v: exit %d, want 3\n%s%s", args, code, tail(out), errOut)
		}
		objs := jsonlObjects(t, out)
		sum := objs[len(objs)-1]
		if sum["incomplete"] != true || !strings.Contains(fmt.Sprint(sum["errors"]), file) {
			t.Fatalf("%v: summary does not name %s as unread: %v", args, file, sum)
		}
		sal := sum["extra"].(map[string]any)["salvage"].(map[string]any)
		if !strings.Contains(fmt.Sprint(sal["unread"]), file) {
			t.Fatalf("%v: extra.salvage.unread %v does not name %s", args, sal["unread"], file)
		}
		return sal
	}
	t.Run("rabbitmq-classic", func(t *testing.T) {
		node := filepath.Join(readableTree(t, testutil.Testdata("rabbitmq", "datasets", "crash.tar.gz")), "rmqfix@localhost")
		file, _ := onlyIn(t, node)
		if err := os.Chmod(filepath.Join(node, filepath.FromSlash(file)), 0); err != nil {
			t.Fatal(err)
		}
		for _, sel := range []string{"all", "lost"} {
			if sal := check(t, node, file, "--select", sel); sal["missing"] != nil {
				t.Fatalf("--select %s: missing %v with %s unread", sel, sal["missing"], file)
			}
		}
	})
	t.Run("rocketmq", func(t *testing.T) {
		store := filepath.Join(readableTree(t, testutil.Testdata("rocketmq", "rmq533-a-clean.tar.gz")), "store")
		const file, base = "commitlog/00000000000000262144", 262144
		if err := os.Chmod(filepath.Join(store, filepath.FromSlash(file)), 0); err != nil {
			t.Fatal(err)
		}
		check(t, store, file)
		sal := check(t, store, file, "--select", "lost")
		missing, _ := sal["missing"].([]any)
		for _, m := range missing {
			if phy := m.(map[string]any)["phy_offset"].(float64); phy >= base {
				t.Fatalf("--select lost: a unit into the unread %s is called missing: %v", file, m)
			}
		}
		if !strings.Contains(fmt.Sprint(sal["notes"]), "unknown, not missing") {
			t.Fatalf("--select lost: no note counts the units into %s as unknown: %v", file, sal["notes"])
		}
	})
	t.Run("rocketmq5x-dledger", func(t *testing.T) {
		store := filepath.Join(readableTree(t, testutil.Testdata("rocketmq-5x", "rmq533-dl2-kill.tar.gz")), "store")
		const file = "dledger-n0/data/00000000000000262144"
		if err := os.Chmod(filepath.Join(store, filepath.FromSlash(file)), 0); err != nil {
			t.Fatal(err)
		}
		check(t, store, file)
	})
	t.Run("rocketmq5x-timer", func(t *testing.T) {
		store := filepath.Join(readableTree(t, testutil.Testdata("rocketmq-5x", "rmq533-t2-kill.tar.gz")), "store")
		const file = "timerwheel"
		if err := os.Chmod(filepath.Join(store, file), 0); err != nil {
			t.Fatal(err)
		}
		check(t, store, file, "--select", "lost")
	})
	t.Run("rabbitmq-quorum", func(t *testing.T) {
		node := filepath.Join(readableTree(t, testutil.Testdata("rabbitmq-4.0-qq-stream", "datasets", "Q1.tar.gz")), "rmq40@localhost")
		segs, _ := filepath.Glob(filepath.Join(node, "quorum", "rmq40@localhost", "*", "*.segment"))
		if len(segs) == 0 {
			t.Fatal("no quorum segment in Q1")
		}
		sort.Strings(segs)
		seg := segs[len(segs)-1]
		file, _ := filepath.Rel(node, seg)
		if err := os.Chmod(seg, 0); err != nil {
			t.Fatal(err)
		}
		code, out, errOut := runAsNobody(t, "verify", node, "-o", "jsonl")
		if code != exitIncomplete || !strings.Contains(out, `"code":"rabbitmq.quorum.unreadable"`) {
			t.Fatalf("verify with %s unread: exit %d, want 3 with a quorum.unreadable finding\n%s%s", file, code, tail(out), errOut)
		}
		sal := check(t, node, file)
		missing, _ := sal["missing"].([]any)
		for _, m := range missing {
			if !strings.Contains(m.(map[string]any)["why"].(string), "unknown, not lost") {
				t.Fatalf("missing %v with %s unread does not say it is unknown", m, file)
			}
		}
	})
}

// TestUnreadTimerlogFile: a RocketMQ 5.x timerlog file that cannot be
// read (a FIFO, a directory, a file nobody may read in its place) makes
// scan, verify and salvage --select lost exit 3, with the file named as
// unreadable (storectl.file.unreadable) and its byte range as unknown
// (rocketmq.timerlog.unknown, waiting on it); no bad-file-name,
// offset-gap, bad-prev-pos or wheel slot finding is drawn from it, and
// every finding that is not about it is one the intact store's run has
// too. They used to report it as bad-file-name, the next file as an
// offset-gap, 20 bad-prev-pos and 9 slot-bad-unit, and exit 1. T1, file
// 4096: where the timer recovery's walk begins.
func TestUnreadTimerlogFile(t *testing.T) {
	const rel = "timerlog/00000000000000004096"
	now := "--timer-now=1796163834084" // T1's restart
	findings := func(t *testing.T, out string) []map[string]any {
		var fs []map[string]any
		for _, o := range jsonlObjects(t, out) {
			if o["type"] == "finding" {
				fs = append(fs, o)
			}
		}
		return fs
	}
	for _, kind := range []string{"fifo", "dir", "permission"} {
		t.Run(kind, func(t *testing.T) {
			store := filepath.Join(readableTree(t, testutil.Testdata("rocketmq-5x", "rmq533-t1-clean.tar.gz")), "store")
			run := func(t *testing.T, args ...string) (int, string, string) { return sub{}.run(t, args...) } // under a deadline: no hang on the FIFO
			if kind == "permission" {
				run = runAsNobody
			}
			intact := map[string]map[string]bool{}
			for _, cmd := range []string{"scan", "verify"} {
				code, out, errOut := run(t, cmd, now, "-o", "jsonl", store)
				if code != exitOK {
					t.Fatalf("%s of the intact store: exit %d\n%s%s", cmd, code, tail(out), errOut)
				}
				intact[cmd] = map[string]bool{}
				for _, f := range findings(t, out) {
					b, _ := json.Marshal(f)
					intact[cmd][string(b)] = true
				}
			}
			p := filepath.Join(store, filepath.FromSlash(rel))
			switch kind {
			case "fifo":
				mkfifo(t, p)
			case "dir":
				dirInPlace(t, p)
			case "permission":
				if err := os.Chmod(p, 0); err != nil {
					t.Fatal(err)
				}
			}
			for _, cmd := range []string{"scan", "verify"} {
				code, out, errOut := run(t, cmd, now, "-o", "jsonl", store)
				if code != exitIncomplete {
					t.Fatalf("%s: exit %d, want 3\n%s%s", cmd, code, tail(out), errOut)
				}
				unreadable, unknown := false, false
				for _, f := range findings(t, out) {
					c, _ := f["code"].(string)
					d, _ := f["details"].(map[string]any)
					w, _ := d["waits_on"].([]any)
					about := f["path"] == rel || len(w) > 0 && fmt.Sprint(w) == "["+rel+"]"
					switch c {
					case "storectl.file.unreadable":
						unreadable = unreadable || f["path"] == rel
					case "rocketmq.timerlog.unknown":
						unknown = f["path"] == rel && about && f["length"] == float64(4096)
					case "rocketmq.timerlog.bad-file-name", "rocketmq.timerlog.offset-gap", "rocketmq.timerlog.bad-prev-pos",
						"rocketmq.timerwheel.slot-bad-unit", "rocketmq.timerwheel.slot-past-timerlog":
						t.Errorf("%s: %s %v@%v: %v", cmd, c, f["path"], f["offset"], f["message"])
					}
					b, _ := json.Marshal(f)
					if !about && !intact[cmd][string(b)] {
						t.Errorf("%s: a finding the intact store's run does not have: %s", cmd, b)
					}
				}
				if !unreadable || !unknown {
					t.Errorf("%s: storectl.file.unreadable %v, rocketmq.timerlog.unknown with its range %v, for %s\n%s", cmd, unreadable, unknown, rel, tail(out))
				}
			}
			out := filepath.Join(nobodyDir(t), "out")
			code, sout, errOut := run(t, "salvage", now, "--select", "lost", "--out", out, "-o", "jsonl", store)
			if code != exitIncomplete || !strings.Contains(errOut, rel) {
				t.Fatalf("salvage --select lost: exit %d, want 3 naming %s\n%s%s", code, rel, tail(sout), errOut)
			}
		})
	}
}

// TestUnreadCommitLogTimer: a commitlog file that cannot be read leaves the
// recovery end a lower bound, and the timer units pointing at or past it
// are unknown, not beyond the end or lost: scan and verify of T1 with its
// commitlog file mode 000 (read as nobody) exit 3 with one
// rocketmq.timerlog.target-unknown waiting on the file, no per-unit
// beyond-end or lost finding, and an unknown recovery plan; salvage
// --select lost exports no timer message as lost.
func TestUnreadCommitLogTimer(t *testing.T) {
	const rel = "commitlog/00000000000000000000"
	now := "--timer-now=1796163834084" // T1's restart
	store := filepath.Join(readableTree(t, testutil.Testdata("rocketmq-5x", "rmq533-t1-clean.tar.gz")), "store")
	code, out, errOut := runAsNobody(t, "scan", now, "-o", "jsonl", store)
	if code != exitOK && code != exitFindings {
		t.Fatalf("scan of the intact store: exit %d\n%s%s", code, tail(out), errOut)
	}
	beyond := 0
	for _, o := range jsonlObjects(t, out) {
		if o["code"] == "rocketmq.timerlog.beyond-commitlog-end" || o["code"] == "rocketmq.timerlog.at-recovery-end" {
			beyond++
		}
	}
	p := filepath.Join(store, filepath.FromSlash(rel))
	if err := os.Chmod(p, 0); err != nil {
		t.Fatal(err)
	}
	for _, cmd := range []string{"scan", "verify"} {
		code, out, errOut := runAsNobody(t, cmd, now, "-o", "jsonl", store)
		if code != exitIncomplete {
			t.Fatalf("%s: exit %d, want 3\n%s%s", cmd, code, tail(out), errOut)
		}
		units, planUnknown := -1, false
		for _, o := range jsonlObjects(t, out) {
			if o["type"] != "finding" {
				continue
			}
			d, _ := o["details"].(map[string]any)
			switch o["code"] {
			case "rocketmq.timerlog.target-unknown":
				if w := fmt.Sprint(d["waits_on"]); w != "["+rel+"]" {
					t.Errorf("%s: target-unknown waits on %s", cmd, w)
				}
				units = int(d["units"].(float64))
			case "rocketmq.timer.recovery-plan":
				planUnknown = d["unknown"] == true
			case "rocketmq.timerlog.beyond-commitlog-end", "rocketmq.timerlog.at-recovery-end", "rocketmq.timer.message-lost",
				"rocketmq.timer.duplicate-delivery", "rocketmq.timercheck.ahead-of-consume-queue":
				t.Errorf("%s: %s %v@%v with the commitlog's end unknown: %v", cmd, o["code"], o["path"], o["offset"], o["message"])
			}
		}
		if units <= beyond || !planUnknown {
			t.Errorf("%s: %d units unknown (the intact store has %d beyond its end, the unread file's all come on top); recovery plan unknown %v\n%s", cmd, units, beyond, planUnknown, tail(out))
		}
	}
	od := nobodyDir(t)
	code, out, errOut = runAsNobody(t, "salvage", now, "--select", "lost", "--out", filepath.Join(od, "out"), "-o", "jsonl", store)
	if code != exitIncomplete {
		t.Fatalf("salvage --select lost: exit %d, want 3\n%s%s", code, tail(out), errOut)
	}
	if b, err := os.ReadFile(filepath.Join(od, "out", "messages.jsonl")); err == nil && strings.Contains(string(b), "rmq_sys_wheel_timer") {
		t.Errorf("salvage --select lost exported timer messages with the commitlog's end unknown:\n%s", b)
	}
}

// TestUnreadLaterCommitLogEarlyEnd: T2's first commitlog file ends in
// zeros without a BLANK and its second holds only zeros: no early-end
// (nothing is dropped). With the second file unreadable, whether it holds
// data is unknown: an early-end warning waiting on it, not the error that
// says later files hold data (what the run said before).
func TestUnreadLaterCommitLogEarlyEnd(t *testing.T) {
	const rel = "commitlog/00000000000000262144"
	store := filepath.Join(readableTree(t, testutil.Testdata("rocketmq-5x", "rmq533-t2-kill.tar.gz")), "store")
	early := func(t *testing.T) []map[string]any {
		t.Helper()
		_, out, _ := runAsNobody(t, "scan", "--timer-now=1796163902000", "-o", "jsonl", store)
		var got []map[string]any
		for _, o := range jsonlObjects(t, out) {
			if o["code"] == "rocketmq.commitlog.early-end" {
				got = append(got, o)
			}
		}
		return got
	}
	if fs := early(t); len(fs) != 0 {
		t.Fatalf("intact: %v", fs)
	}
	if err := os.Chmod(filepath.Join(store, filepath.FromSlash(rel)), 0); err != nil {
		t.Fatal(err)
	}
	fs := early(t)
	if len(fs) != 1 {
		t.Fatalf("with %s unreadable: %d early-end findings: %v", rel, len(fs), fs)
	}
	f := fs[0]
	if w := fmt.Sprint(f["details"].(map[string]any)["waits_on"]); f["severity"] != "warning" || w != "["+rel+"]" || !strings.Contains(f["message"].(string), "unknown") {
		t.Fatalf("with %s unreadable: %v", rel, f)
	}
}

// TestUnreadPossibleRecoveryStart: after T2's unclean shutdown the abnormal
// recovery tries the commitlog files from the last back and starts at the
// first whose first record is old enough (file 0 of the intact store).
// With the second file unreadable it may start there instead, so verify's
// recovery end is a lower bound: exit 3, no summary recovery_end, the
// unclean-shutdown plan naming the file it waits on, and no timer
// prediction (no duplicate or lost deliveries).
func TestUnreadPossibleRecoveryStart(t *testing.T) {
	const rel = "commitlog/00000000000000262144"
	now := "--timer-now=1796163902000" // T2's restart
	store := filepath.Join(readableTree(t, testutil.Testdata("rocketmq-5x", "rmq533-t2-kill.tar.gz")), "store")
	summary := func(objs []map[string]any) map[string]any { return objs[len(objs)-1] }
	code, out, errOut := runAsNobody(t, "verify", now, "-o", "jsonl", store)
	objs := jsonlObjects(t, out)
	if code != exitFindings || summary(objs)["recovery_end"] == nil {
		t.Fatalf("intact: exit %d, recovery_end %v\n%s%s", code, summary(objs)["recovery_end"], tail(out), errOut)
	}
	dups := 0
	for _, o := range objs {
		if d, _ := o["details"].(map[string]any); o["code"] == "rocketmq.store.unclean-shutdown" && d["start_file"] != "00000000000000000000" {
			t.Fatalf("intact: the recovery starts at %v, not at the first file: the test's premise is gone", d["start_file"])
		}
		if o["code"] == "rocketmq.timer.duplicate-delivery" {
			dups++
		}
	}
	if dups == 0 {
		t.Fatal("intact: no duplicate deliveries predicted: the test's premise is gone")
	}
	// The start the commitlog scan decides (recoverAbnormally's rule on
	// each file's raw first bytes; it names only a start past file 0).
	// With rel unreadable the scan's rule still picks it (rel is only a
	// possible start), and verify must say the same.
	sres, err := rocketmq.ScanCommitLog(context.Background(), rocketmq.Config{Root: store}, scan.Options{Jobs: 2})
	if err != nil {
		t.Fatal(err)
	}
	scanStart := "00000000000000000000"
	if f, ok := sres.Layout["recovery_start_file"]; ok {
		scanStart = f.(string)
	}
	if err := os.Chmod(filepath.Join(store, filepath.FromSlash(rel)), 0); err != nil {
		t.Fatal(err)
	}
	code, out, errOut = runAsNobody(t, "verify", now, "-o", "jsonl", store)
	objs = jsonlObjects(t, out)
	sum := summary(objs)
	u, _ := sum["extra"].(map[string]any)["recovery_end_unknown"].(map[string]any)
	if code != exitIncomplete || sum["recovery_end"] != nil || u["waits_on"] != rel {
		t.Fatalf("exit %d, recovery_end %v, recovery_end_unknown %v\n%s%s", code, sum["recovery_end"], u, tail(out), errOut)
	}
	plan := false
	for _, o := range objs {
		d, _ := o["details"].(map[string]any)
		switch o["code"] {
		case "rocketmq.store.unclean-shutdown":
			plan = fmt.Sprint(d["start_waits_on"]) == "["+rel+"]"
			if d["start_file"] != scanStart {
				t.Errorf("unclean-shutdown start_file %v, the scan's %s", d["start_file"], scanStart)
			}
		case "rocketmq.timer.duplicate-delivery", "rocketmq.timer.message-lost", "rocketmq.timerlog.beyond-commitlog-end":
			t.Errorf("%s with the recovery start unknown: %v", o["code"], o["message"])
		}
	}
	if !plan {
		t.Errorf("the unclean-shutdown plan does not say its start waits on %s\n%s", rel, tail(out))
	}
	if l, _ := sum["extra"].(map[string]any)["layout"].(map[string]any); l["recovery_start_file"] != scanStart {
		t.Errorf("recovery_start_file %v, the scan's %s", l["recovery_start_file"], scanStart)
	}
}

// nobodyDir is a new dir anyone may write (removed after the test), for
// what a command run as nobody writes: t.TempDir's parent is 0700.
func nobodyDir(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp("", "storectl-salvage-out-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	if err := os.Chmod(d, 0o777); err != nil {
		t.Fatal(err)
	}
	return d
}

// TestUnreadMaybeRecoveryStartScan: the scan, not only verify, takes an
// unreadable file after its walk's stop as a possible abnormal start.
// rmq533-b-abnormal with the checkpoint's min time between the first
// records of files 2 and 3 (the broker starts at file 2), file 1 zeroed
// from its middle, and file 2 unreadable: scan, verify and salvage give no
// beyond-recovery-end finding (file 3 is the broker's if it starts at file
// 2), no summary recovery_end, and a recovery end unknown waiting on file
// 2; readable, verify ends where the broker does, past file 3's records.
func TestUnreadMaybeRecoveryStartScan(t *testing.T) {
	const rel = "commitlog/00000000000000524288"
	store := filepath.Join(readableTree(t, testutil.Testdata("rocketmq", "rmq533-b-abnormal.tar.gz")), "store")
	cp := filepath.Join(store, "checkpoint")
	b, err := os.ReadFile(cp)
	if err != nil {
		t.Fatal(err)
	}
	binary.BigEndian.PutUint64(b[0:], 1795996150000) // physicMsgTimestamp
	binary.BigEndian.PutUint64(b[8:], 1795996150000) // logicsMsgTimestamp
	if err := os.WriteFile(cp, b, 0o644); err != nil {
		t.Fatal(err)
	}
	f1 := filepath.Join(store, "commitlog", "00000000000000262144")
	z := make([]byte, 131072)
	fh, err := os.OpenFile(f1, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fh.WriteAt(z, 131072); err != nil {
		t.Fatal(err)
	}
	fh.Close()
	code, out, errOut := runAsNobody(t, "verify", "-o", "jsonl", store)
	objs := jsonlObjects(t, out)
	if sum := objs[len(objs)-1]; code != exitFindings || sum["recovery_end"] != float64(1037572) {
		t.Fatalf("readable: exit %d, recovery_end %v (the broker starts at file 2 and ends at 1037572)\n%s%s", code, sum["recovery_end"], tail(out), errOut)
	}
	if err := os.Chmod(filepath.Join(store, filepath.FromSlash(rel)), 0); err != nil {
		t.Fatal(err)
	}
	for _, cmd := range []string{"scan", "verify"} {
		code, out, errOut := runAsNobody(t, cmd, "-o", "jsonl", store)
		objs := jsonlObjects(t, out)
		sum := objs[len(objs)-1]
		u, _ := sum["extra"].(map[string]any)["recovery_end_unknown"].(map[string]any)
		if code != exitIncomplete || sum["recovery_end"] != nil || u["waits_on"] != rel {
			t.Fatalf("%s: exit %d, recovery_end %v, recovery_end_unknown %v\n%s%s", cmd, code, sum["recovery_end"], u, tail(out), errOut)
		}
		for _, o := range objs {
			if c, _ := o["code"].(string); strings.Contains(c, "beyond") {
				t.Errorf("%s: %s %v: %v", cmd, c, o["path"], o["message"])
			}
		}
	}
	od := nobodyDir(t)
	code, out, errOut = runAsNobody(t, "salvage", "--select", "after-corruption", "--out", filepath.Join(od, "out"), "-o", "jsonl", store)
	if code != exitIncomplete {
		t.Fatalf("salvage: exit %d\n%s%s", code, tail(out), errOut)
	}
	if b, err := os.ReadFile(filepath.Join(od, "out", "messages.jsonl")); err == nil && strings.Contains(string(b), "recovery drops") {
		t.Errorf("salvage says recovery drops records the broker may keep:\n%s", b)
	}
}

// TestUnreadDLedgerTimer: a DLedger store with a timer store (DL1 with
// T1's timerlog, wheel and config) whose data file cannot be read: the
// timer units are unknown (one target-unknown), not lost, and the timer
// scan does not fail looking for a plain commitlog it was never given.
func TestUnreadDLedgerTimer(t *testing.T) {
	const rel = "dledger-n0/data/00000000000000000000"
	store := filepath.Join(readableTree(t, testutil.Testdata("rocketmq-5x", "rmq533-dl1-clean.tar.gz")), "store")
	t1 := filepath.Join(readableTree(t, testutil.Testdata("rocketmq-5x", "rmq533-t1-clean.tar.gz")), "store")
	for _, d := range []string{"timerlog", "config"} {
		if err := os.CopyFS(filepath.Join(store, d), os.DirFS(filepath.Join(t1, d))); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(filepath.Join(t1, "timerwheel"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(store, "timerwheel"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := filepath.Walk(store, func(p string, _ os.FileInfo, err error) error {
		if err == nil {
			err = os.Chmod(p, 0o755)
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	now := "--timer-now=1796163834084" // T1's restart
	if code, out, errOut := runAsNobody(t, "scan", now, "-o", "jsonl", store); code != exitFindings || !strings.Contains(out, `"rocketmq.timer.message-lost"`) {
		t.Fatalf("readable: exit %d, want 1 with T1's units lost against DL1's records\n%s%s", code, tail(out), errOut)
	}
	if err := os.Chmod(filepath.Join(store, filepath.FromSlash(rel)), 0); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runAsNobody(t, "scan", now, "-o", "jsonl", store)
	if code != exitIncomplete || strings.Contains(out, "scanning the commitlog") || strings.Contains(errOut, "scanning the commitlog") {
		t.Fatalf("exit %d, want 3 without a plain commitlog scan\n%s%s", code, tail(out), errOut)
	}
	unknown := false
	for _, o := range jsonlObjects(t, out) {
		switch o["code"] {
		case "rocketmq.timerlog.target-unknown":
			unknown = true
		case "rocketmq.timer.message-lost", "rocketmq.timerlog.not-a-record", "rocketmq.timerlog.beyond-commitlog-end":
			t.Errorf("%s with %s unreadable: %v", o["code"], rel, o["message"])
		}
	}
	if !unknown {
		t.Errorf("no rocketmq.timerlog.target-unknown\n%s", tail(out))
	}
}
