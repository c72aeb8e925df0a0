package rocketmq

import (
	"path/filepath"
	"sort"

	"github.com/storectl/storectl/pkg/repair"
	scanrmq "github.com/storectl/storectl/pkg/scan/rocketmq"
)

// rbRemoveEmptiedDirs adds a remove-dir for every consumequeue/<topic>/<queueId>
// dir whose entries are all CQ files the plan removes (removed) and into
// which no rebuilt file goes (want), then for every topic dir all of whose
// entries are queue dirs removed that way. repair.Apply runs them after
// the file removals, deepest first, and refuses a dir that is not empty by
// then. A dir that was already empty is left alone: the rebuild did not
// empty it.
func rbRemoveEmptiedDirs(plan *repair.Plan, ex *rbExisting, want map[string]bool, removed []string, diffs map[rbQueue]*QueueDiff) error {
	kept := map[string]bool{}
	for rel := range want {
		kept[filepath.Dir(rel)], kept[filepath.Dir(filepath.Dir(rel))] = true, true
	}
	gone := map[string]int{} // dir -> entries the plan removes from it
	var qdirs []string
	for _, rel := range removed {
		q := filepath.Dir(rel)
		if gone[q] == 0 {
			qdirs = append(qdirs, q)
		}
		gone[q]++
	}
	sort.Strings(qdirs)
	var tdirs []string
	for _, q := range qdirs {
		if kept[q] || gone[q] != ex.entries[q] {
			continue
		}
		if err := rbAddRemoveDir(plan, q); err != nil {
			return err
		}
		if k, ok := rbQueueOf(filepath.Join(q, "f")); ok && diffs[k] != nil {
			diffs[k].DirRemoved = true
		}
		t := filepath.Dir(q)
		if gone[t] == 0 {
			tdirs = append(tdirs, t)
		}
		gone[t]++
	}
	for _, t := range tdirs { // sorted, as qdirs are
		if !kept[t] && gone[t] == ex.entries[t] {
			if err := rbAddRemoveDir(plan, t); err != nil {
				return err
			}
		}
	}
	return nil
}

func rbAddRemoveDir(plan *repair.Plan, dir string) error {
	return plan.Add(repair.Action{Op: repair.OpRemoveDir, Path: dir, Reason: scanrmq.CodeCQExtraFile,
		Lost: repair.Loss{Note: "consume queue dir the removal of its files leaves empty"}}, repair.SnapshotOptions{})
}
