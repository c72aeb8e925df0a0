package main

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/storectl/storectl/internal/testutil"
)

// TestWhatRestsOnAnUnreadQueueFile: a consume queue file that cannot be
// read (a directory in its place) leaves unknown what rests on its
// queue's units, and nothing is concluded from its absence:
//   - the timer topic's queue (rmq_sys_wheel_timer/0): the timer recovery
//     clamps its queue offset to the queue's range and enqueues from it,
//     so the next start is not predicted (t2-kill with its second file a
//     dir predicted "enqueues again from timer queue offset 50 (0
//     entries)"), and the file is named once though two readers read it;
//   - a delay level's queue (SCHEDULE_TOPIC_XXXX/2 of c-stale): its offset
//     is not compared with the queue's max (it was delay-offset-above-max:
//     "offset 2 is above the max offset 0"), but offset-unknown waiting on
//     the file;
//   - an index file whose entries point into a commitlog file that could
//     not be read: its endTimestamp is not checked against the entries it
//     could see (c-stale with commitlog/00000000000000524288 a dir gave
//     index.bad-header).
func TestWhatRestsOnAnUnreadQueueFile(t *testing.T) {
	untar := func(t *testing.T, dir, ds string) string {
		return filepath.Join(testutil.Untar(t, testutil.Testdata(dir, ds+".tar.gz")), "store")
	}
	dirFor := func(t *testing.T, store, rel string) {
		p := filepath.Join(store, filepath.FromSlash(rel))
		dirInPlace(t, p)
	}
	run := func(t *testing.T, want int, args ...string) map[string][]map[string]any {
		code, out, errOut := runCLI(t, append(args, "-o", "jsonl")...)
		if code != want {
			t.Fatalf("%v: exit %d, want %d\n%s\n%s", args, code, want, out, errOut)
		}
		by := map[string][]map[string]any{}
		for _, o := range jsonlObjects(t, out) {
			if c, ok := o["code"].(string); ok {
				by[c] = append(by[c], o)
			}
		}
		return by
	}
	waits := func(o map[string]any) []string {
		d, _ := o["details"].(map[string]any)
		var s []string
		for _, x := range d["waits_on"].([]any) {
			s = append(s, x.(string))
		}
		return s
	}

	t.Run("timer", func(t *testing.T) {
		const rel = "consumequeue/rmq_sys_wheel_timer/0/00000000000000001000"
		store := untar(t, "rocketmq-5x", "rmq533-t2-kill")
		if by := run(t, exitFindings, "verify", store); by["rocketmq.timer.recovery-plan"][0]["details"].(map[string]any)["unknown"] != nil {
			t.Fatalf("undamaged: the prediction is unknown: %v", by["rocketmq.timer.recovery-plan"])
		}
		dirFor(t, store, rel)
		for _, cmd := range []string{"scan", "verify"} {
			by := run(t, exitIncomplete, cmd, store)
			plan := by["rocketmq.timer.recovery-plan"]
			if len(plan) != 1 || plan[0]["details"].(map[string]any)["unknown"] != true || !slices.Contains(waits(plan[0]), rel) {
				t.Fatalf("%s: timer plan %v, want unknown waiting on %s", cmd, plan, rel)
			}
			n := 0
			for _, o := range by["storectl.file.unreadable"] {
				if o["path"] == rel {
					n++
				}
			}
			if n != 1 {
				t.Fatalf("%s: %s named unreadable %d times", cmd, rel, n)
			}
		}
	})
	t.Run("delay-offset", func(t *testing.T) {
		const rel = "consumequeue/SCHEDULE_TOPIC_XXXX/2/00000000000000000000"
		store := untar(t, "rocketmq", "rmq497-c-stale")
		if by := run(t, exitFindings, "verify", store); len(by["rocketmq.config.offset-unknown"]) != 0 {
			t.Fatalf("undamaged: %v", by["rocketmq.config.offset-unknown"])
		}
		dirFor(t, store, rel)
		by := run(t, exitIncomplete, "verify", store)
		if a := by["rocketmq.config.delay-offset-above-max"]; len(a) != 0 {
			t.Fatalf("an offset compared with the max of a queue not read: %v", a)
		}
		u := by["rocketmq.config.offset-unknown"]
		if len(u) != 1 || u[0]["path"] != "config/delayOffset.json" || !slices.Equal(waits(u[0]), []string{rel}) {
			t.Fatalf("offset-unknown: %v", u)
		}
		// truncate's offset cap would cap nothing there and say so
		// by silence: it refuses to plan.
		if code, _, errOut := runCLI(t, "truncate", store); code != exitIncomplete || !strings.Contains(errOut, "refusing to plan the offset cap") {
			t.Fatalf("truncate: exit %d, %s", code, errOut)
		}
	})
	t.Run("index-header", func(t *testing.T) {
		store := untar(t, "rocketmq", "rmq497-c-stale")
		dirFor(t, store, "commitlog/00000000000000524288")
		by := run(t, exitIncomplete, "verify", store)
		if h := by["rocketmq.index.bad-header"]; len(h) != 0 {
			t.Fatalf("an index header judged by the entries storectl could follow: %v", h)
		}
		if len(by["rocketmq.index.unknown"]) == 0 {
			t.Fatal("no index.unknown for the entries pointing into the unread file")
		}
	})
}
