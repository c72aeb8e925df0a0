package rmq5x

import (
	"github.com/storectl/storectl/pkg/repair"
	"github.com/storectl/storectl/pkg/scan/cqueue"
)

// CodeRocksDBAside is the reason of the actions that move a RocksDB
// consume queue aside.
const CodeRocksDBAside = "rocketmq.consumequeue.rocksdb"

// RocksDBAside is what PlanRocksDBAside planned.
type RocksDBAside struct {
	Files []string `json:"files"`
	Note  string   `json:"note"`
}

// PlanRocksDBAside moves every file of a RocksDB consume queue
// (consumequeue/ itself is the database with storeType=defaultRocksDB) to
// the backup: the consume queue is derived data, and a broker that finds
// consumequeue/ empty dispatches again from the commitlog (its reput
// starts at the queues' max physical offset, 0 for none). storectl never
// edits the database. A store without one adds nothing.
func PlanRocksDBAside(plan *repair.Plan, root string) (*RocksDBAside, error) {
	l, ok := cqueue.RocksDB(root)
	if !ok {
		return nil, nil
	}
	out := &RocksDBAside{Note: "the RocksDB consume queue is moved aside (to the backup), not edited: the broker rebuilds it from the commitlog at its next start by dispatching every record again; consumers' committed offsets are kept. Until that dispatch is done, pulls find fewer messages than the commitlog holds; undo puts the database back."}
	for _, n := range l.Files() {
		rel := cqueue.Dir + "/" + n
		if err := plan.Add(repair.Action{Op: repair.OpRemoveFile, Path: rel, Reason: CodeRocksDBAside,
			Lost: repair.Loss{Note: "RocksDB consume queue file (derived data, rebuilt by the broker)"}}, repair.SnapshotOptions{}); err != nil {
			return nil, err
		}
		out.Files = append(out.Files, rel)
	}
	return out, nil
}
