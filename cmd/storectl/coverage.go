package main

import (
	"github.com/storectl/storectl/pkg/report"
	"github.com/storectl/storectl/pkg/scan"
)

// takeCoverage inventories every target's tree for command (what the
// command's scanners read: pkg/scan/components.go) and lists the
// components in the run record.
func takeCoverage(command string, run *report.Run, ts ...scan.Target) []*scan.Inventory {
	var invs []*scan.Inventory
	for _, t := range ts {
		inv := scan.TakeInventory(t)
		inv.Check(command)
		run.Components = append(run.Components, inv.Components...)
		invs = append(invs, inv)
	}
	return invs
}

// coverage reports what the inventories found unread: one
// coverage.unchecked finding per component not checked, and a directory
// that could not be listed makes the run incomplete.
func (s *session) coverage(invs []*scan.Inventory) error {
	for _, inv := range invs {
		for _, f := range inv.Findings() {
			if err := s.finding(f); err != nil {
				return err
			}
		}
		if len(inv.Errors) > 0 {
			s.incomplete = true
			s.errors = append(s.errors, inv.Errors...)
		}
	}
	return nil
}
