package main

import (
	"cmp"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/storectl/storectl/internal/testutil"
)

// TestDispatchFromUnread: where the next start dispatches from is the
// highest end of any consume queue's units, so a consume queue file that
// cannot be read makes it a lower bound, and a record after its queue's
// last unit may or may not get one. The a-clean store with the newest
// unit zeroed reports that record not-dispatched at info (the broker
// dispatches it itself); with another queue's file a directory, the same
// record is a warning that waits on that file, and the recovery plan and
// the layout say dispatch_from is only a lower bound. With the abort file
// as well, recoverAbnormally re-dispatches from its start file whatever
// the queues hold: info again.
func TestDispatchFromUnread(t *testing.T) {
	setup := func(t *testing.T) (store string, newest cqUnit, other string) {
		store = filepath.Join(testutil.Untar(t, testutil.Testdata("rocketmq", "rmq533-a-clean.tar.gz")), "store")
		newest = newestCQUnit(t, store)
		for _, u := range cqUnits(t, store) {
			if u.dir != newest.dir {
				other = u.file
				break
			}
		}
		if other == "" {
			t.Fatalf("fixture: no queue but the newest unit's %s", newest.dir)
		}
		clearCQUnit(t, newest)
		return store, newest, other
	}
	// verify's finding for the record of the zeroed unit, the recovery
	// plan's details and the layout.
	run := func(t *testing.T, store string, phy int64, wantCode int) (missing, plan, layout map[string]any) {
		code, out, errOut := runCLI(t, "verify", store, "-o", "jsonl")
		if code != wantCode {
			t.Fatalf("verify: exit %d, want %d\n%s\n%s", code, wantCode, out, errOut)
		}
		for _, o := range jsonlObjects(t, out) {
			d, _ := o["details"].(map[string]any)
			switch {
			case o["code"] == "rocketmq.consumequeue.missing" && d["phy_offset"] != nil && int64(d["phy_offset"].(float64)) == phy:
				if missing != nil {
					t.Fatalf("two findings for the record at %d", phy)
				}
				missing = o
			case o["code"] == "rocketmq.checkpoint.recovery-plan" || o["code"] == "rocketmq.store.unclean-shutdown":
				plan = d
			case o["code"] == "rocketmq.checkpoint.recovery-skips-undispatched":
				t.Fatalf("records whose units are in the unread file called skipped: %v", o)
			case o["type"] == "summary":
				x, _ := o["extra"].(map[string]any)
				layout, _ = x["layout"].(map[string]any)
			}
		}
		if missing == nil || plan == nil || layout == nil {
			t.Fatalf("missing finding %v, plan %v, layout %v\n%s", missing, plan, layout, out)
		}
		return missing, plan, layout
	}
	rel := func(t *testing.T, store, p string) string {
		r, err := filepath.Rel(store, p)
		if err != nil {
			t.Fatal(err)
		}
		return filepath.ToSlash(r)
	}
	waitsOn := func(v any) []string {
		var s []string
		l, _ := v.([]any)
		for _, x := range l {
			s = append(s, x.(string))
		}
		return s
	}

	t.Run("read", func(t *testing.T) {
		store, newest, _ := setup(t)
		m, plan, layout := run(t, store, newest.off, exitOK)
		d := m["details"].(map[string]any)
		if m["severity"] != "info" || d["state"] != "not-dispatched" || d["redispatch_from"] == nil || d["waits_on"] != nil {
			t.Fatalf("with every consume queue file read: %v", m)
		}
		if plan["dispatch_from"] == nil || plan["dispatch_from_at_least"] != nil || layout["dispatch_from_waits_on"] != nil {
			t.Fatalf("plan %v, layout %v", plan, layout)
		}
	})
	t.Run("unread", func(t *testing.T) {
		store, newest, other := setup(t)
		dirInPlace(t, other)
		m, plan, layout := run(t, store, newest.off, exitIncomplete)
		d := m["details"].(map[string]any)
		want := []string{rel(t, store, other)}
		if m["severity"] != "warning" || d["state"] != "not-dispatched" || d["redispatch_from"] != nil || d["redispatch_from_at_least"] == nil ||
			!slices.Equal(waitsOn(d["waits_on"]), want) {
			t.Fatalf("with %s unreadable: %v", want[0], m)
		}
		if plan["dispatch_from"] != nil || plan["dispatch_from_at_least"] == nil || !slices.Equal(waitsOn(plan["dispatch_waits_on"]), want) {
			t.Fatalf("plan: %v", plan)
		}
		if !slices.Equal(waitsOn(layout["dispatch_from_waits_on"]), want) {
			t.Fatalf("layout: %v", layout)
		}
	})
	t.Run("abort-checkpoint-unread", func(t *testing.T) {
		// The last unit of the queue whose last unit is the second newest
		// zeroed: its record is behind where the queues end, so only
		// recoverAbnormally's re-dispatch from its start file gives it a
		// unit. With the checkpoint read that start is known and before
		// the record (info); with the checkpoint a directory the start is
		// unknown (it may be the last file): a warning waiting on it.
		for _, cpUnread := range []bool{false, true} {
			store := filepath.Join(testutil.Untar(t, testutil.Testdata("rocketmq", "rmq533-a-clean.tar.gz")), "store")
			last := map[string]cqUnit{} // per queue dir, its newest unit
			for _, u := range cqUnits(t, store) {
				if l, ok := last[u.dir]; !ok || u.off > l.off {
					last[u.dir] = u
				}
			}
			var byPhy []cqUnit
			for _, u := range last {
				byPhy = append(byPhy, u)
			}
			slices.SortFunc(byPhy, func(a, b cqUnit) int { return cmp.Compare(b.off, a.off) })
			second := byPhy[1]
			clearCQUnit(t, second)
			if err := os.WriteFile(filepath.Join(store, "abort"), nil, 0o644); err != nil {
				t.Fatal(err)
			}
			want := exitOK
			if cpUnread {
				dirInPlace(t, filepath.Join(store, "checkpoint"))
				want = exitIncomplete
			}
			m, _, _ := run(t, store, second.off, want)
			d := m["details"].(map[string]any)
			switch {
			case !cpUnread && (m["severity"] != "info" || d["waits_on"] != nil):
				t.Fatalf("after a crash, the checkpoint read: %v", m)
			case cpUnread && (m["severity"] != "warning" || !slices.Equal(waitsOn(d["waits_on"]), []string{"checkpoint"})):
				t.Fatalf("after a crash with the checkpoint unread: %v", m)
			}
		}
	})
	t.Run("unread-abort", func(t *testing.T) {
		store, newest, other := setup(t)
		dirInPlace(t, other)
		if err := os.WriteFile(filepath.Join(store, "abort"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		m, _, _ := run(t, store, newest.off, exitIncomplete)
		if d := m["details"].(map[string]any); m["severity"] != "info" || d["state"] != "not-dispatched" || d["waits_on"] != nil {
			t.Fatalf("after a crash, recoverAbnormally re-dispatches the record whatever %s holds: %v", other, m)
		}
	})
}
