package rocketmq

import (
	"github.com/storectl/storectl/pkg/repair"
)

// rbAdd adds a rebuild action to the plan. repair.Plan.Add pins it; a file
// to create in a dir that does not exist (a queue of a deleted
// consumequeue/, a deleted index/) records the missing dirs, which
// repair.Apply creates, rolls back and undoes like any change.
func rbAdd(p *repair.Plan, a repair.Action, _ *RebuildReport) error {
	return p.Add(a, repair.SnapshotOptions{})
}
