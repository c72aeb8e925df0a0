package rocketmq

import (
	"context"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/storectl/storectl/internal/testutil"
	"github.com/storectl/storectl/pkg/repair"
)

// TestRebuildRemovesEmptiedQueueDirs plants consume queue files for queues
// no commitlog record maps to: a whole topic (two queues) and one more
// queue of a real topic, plus an already empty queue dir. The plan removes
// the planted files and the dirs they leave empty (queue dirs, then the
// ghost topic), not the real topic nor the dir that was empty before;
// repair.Apply gives back the clean store (files, dirs and modes) and undo
// the planted one.
func TestRebuildRemovesEmptiedQueueDirs(t *testing.T) {
	store := rbFixture(t, "rmq497-a-clean")
	clean := testutil.TreeHashDirs(t, store)
	src, err := os.ReadFile(filepath.Join(store, "consumequeue/TopicA/0/00000000000000000000"))
	if err != nil {
		t.Fatal(err)
	}
	for _, rel := range []string{"consumequeue/Ghost/0/00000000000000000000", "consumequeue/Ghost/1/00000000000000000000", "consumequeue/TopicA/9/00000000000000000000"} {
		os.MkdirAll(filepath.Join(store, filepath.Dir(rel)), 0o755)
		if err := os.WriteFile(filepath.Join(store, rel), src, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	os.MkdirAll(filepath.Join(store, "consumequeue/TopicA/8"), 0o755)
	planted := testutil.TreeHashDirs(t, store)

	cfg := RebuildConfig{DataDir: store}
	p, rep := rbTestPlan(t, cfg)
	var rmdirs []string
	files := 0
	for _, a := range p.Actions {
		switch a.Op {
		case repair.OpRemoveDir:
			rmdirs = append(rmdirs, a.Path)
		case repair.OpRemoveFile:
			files++
		default:
			t.Errorf("unexpected %s %s", a.Op, a.Path)
		}
	}
	if want := []string{"consumequeue/Ghost/0", "consumequeue/Ghost/1", "consumequeue/TopicA/9", "consumequeue/Ghost"}; files != 3 || !slices.Equal(rmdirs, want) {
		t.Fatalf("%d remove-file, remove-dir %q; want 3 and %q", files, rmdirs, want)
	}
	for _, q := range rep.Queues {
		if q.DirRemoved != (q.Topic == "Ghost" || q.QueueID == 9) {
			t.Errorf("queue %s/%d: dir_removed %v", q.Topic, q.QueueID, q.DirRemoved)
		}
	}
	testutil.SameTree(t, planted, testutil.TreeHashDirs(t, store)) // planning writes nothing
	bdir := rbApply(t, cfg, p, rep)
	want := maps.Clone(clean)
	want["consumequeue/TopicA/8/"] = planted["consumequeue/TopicA/8/"] // empty before: left alone
	testutil.SameTree(t, want, testutil.TreeHashDirs(t, store))
	if _, err := repair.Undo(context.Background(), bdir, repair.UndoOptions{Apply: true}); err != nil {
		t.Fatal(err)
	}
	testutil.SameTree(t, planted, testutil.TreeHashDirs(t, store))
	t.Logf("%d actions: 3 planted files and %d dirs removed, clean tree back; undo restored %d planted entries", len(p.Actions), len(rmdirs), len(planted)-len(clean))
}
