package main

import (
	"encoding/json"
	"fmt"
	"path/filepath"

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
		rocketCoverage(inv, t)
		for _, c := range inv.Components {
			if len(ts) > 1 {
				c.Root = t.Root
			}
			run.Components = append(run.Components, c)
		}
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

// inContext widens, for the reading commands, a RabbitMQ message store
// dir given inside its vhost dir to that vhost: which records are
// referenced, and so most of an .rdq file's findings and their severities,
// depend on the vhost's queue indexes. Read alone the same bytes would get
// another verdict than from the node or vhost path. The returned sentence
// says so in the run record ("" when t is unchanged).
func inContext(t scan.Target) (scan.Target, string) {
	if t.Store != scan.RabbitMQ || t.Kind != scan.TargetRabbitStoreDir || len(t.StoreDirs) != 1 ||
		filepath.Clean(t.Root) == filepath.Clean(t.Path) {
		return t, ""
	}
	w := t
	w.Path, w.VHostDirs = t.Root, []string{t.Root}
	return w, fmt.Sprintf("%s was given inside its vhost dir: it is read with the vhost (its queue indexes say which records are referenced, as at a broker start), so its files get the findings the node or vhost path gives them; paths are relative to the vhost dir",
		filepath.Base(t.Path)+"/")
}

// versionAssumption is the run record's note on the broker version.
func versionAssumption(env *Env, store string) string {
	if store != scan.RabbitMQ || env.Config.GetString("broker-version") != "" {
		return ""
	}
	return "broker version not given (--broker-version): every version's scanner is considered, except generation-1 hazards when the store's message terms show a 3.13+ writer (the summary's assumptions say what the files showed)"
}

// nonEmpty drops the empty strings of xs.
func nonEmpty(xs ...string) []string {
	var out []string
	for _, x := range xs {
		if x != "" {
			out = append(out, x)
		}
	}
	return out
}

// rootedRecords hands each record to emit with a "root" member (its
// target's data dir) spliced in, for a run with several targets.
func rootedRecords(emit func(any) error, root string) func(any) error {
	return func(rec any) error { return emit(rootedRecord{root: root, rec: rec}) }
}

// rootedRecord is a record marshalled with "root" as its first member.
type rootedRecord struct {
	root string
	rec  any
}

func (r rootedRecord) MarshalJSON() ([]byte, error) {
	b, err := json.Marshal(r.rec)
	if err != nil || len(b) < 2 || b[0] != '{' {
		return b, err
	}
	head, _ := json.Marshal(map[string]string{"root": r.root})
	head = head[:len(head)-1] // {"root":"..."
	if string(b) == "{}" {
		return append(head, '}'), nil
	}
	return append(append(head, ','), b[1:]...), nil
}
