package rocketmq

import (
	"testing"

	genrmq "github.com/storectl/storectl/internal/gen/rocketmq"
	rmq "github.com/storectl/storectl/pkg/format/rocketmq"
	"github.com/storectl/storectl/pkg/scan"
)

// TestVerifyGenerated: a generated store of a few MiB (commitlog plus
// consume queues, no index or checkpoint) verifies without a warning or
// error, and every dispatched message's unit is linked.
func TestVerifyGenerated(t *testing.T) {
	root := t.TempDir()
	sum, err := genrmq.Generate(root, genrmq.Config{MappedFileSize: 1 << 20, TotalBytes: 4 << 20, Seed: 7, CQFileSize: 100 * 20})
	if err != nil {
		t.Fatal(err)
	}
	dispatched := 0
	res := verifyRoot(t, root, VerifyConfig{Config: Config{Root: root, OnMessage: func(m *rmq.Message, _ int64) error {
		if m.Dispatched() {
			dispatched++
		}
		return nil
	}}})
	for _, f := range res.Findings {
		switch f.Code {
		case CodeRecoveryPlan, CodeCheckpointMissing: // no checkpoint in a generated store
		default:
			t.Errorf("unexpected %s", fmtFinding(f))
		}
	}
	if *res.RecoveryEnd != sum.End {
		t.Errorf("recovery end %d, generator wrote to %d", *res.RecoveryEnd, sum.End)
	}
	if res.Layout["cq_file_size"] != int64(2000) {
		t.Errorf("cq file size %v", res.Layout["cq_file_size"])
	}
	if res.Layout["cq_units_linked"] != dispatched || dispatched == 0 {
		t.Errorf("%v units linked, %d dispatched messages", res.Layout["cq_units_linked"], dispatched)
	}
	t.Logf("%d messages, %v units linked, %d findings", sum.Messages, res.Layout["cq_units_linked"], len(res.Findings))
}

// TestVerifyGeneratedWithIndex: a generated store with the index files and
// checkpoint a clean broker leaves (several index files: small layouts)
// verifies without any finding, every unit and every index entry linked.
func TestVerifyGeneratedWithIndex(t *testing.T) {
	root := t.TempDir()
	sum, err := genrmq.Generate(root, genrmq.Config{MappedFileSize: 1 << 20, TotalBytes: 3 << 20, Seed: 8, CQFileSize: 100 * 20,
		BodyMin: 50, BodyMax: 400, MaxBody: 400, Index: true, IndexSlots: 1000, IndexEntries: 4000})
	if err != nil {
		t.Fatal(err)
	}
	res := verifyRoot(t, root, VerifyConfig{Config: Config{Root: root}})
	for _, f := range res.Findings {
		if f.Severity >= scan.Info && f.Code != CodeRecoveryPlan {
			t.Errorf("unexpected %s", fmtFinding(f))
		}
	}
	if res.Layout["index_files"].(int) < 3 {
		t.Errorf("%v index files, want several", res.Layout["index_files"])
	}
	if res.Layout["index_entries_linked"].(int) == 0 || res.Layout["cq_units_linked"].(int) == 0 {
		t.Errorf("nothing linked: %v", res.Layout)
	}
	t.Logf("%d messages, %v units and %v index entries linked in %v index files, %d findings", sum.Messages,
		res.Layout["cq_units_linked"], res.Layout["index_entries_linked"], res.Layout["index_files"], len(res.Findings))
}
