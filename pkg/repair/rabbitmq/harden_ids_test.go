package rabbitmq

import (
	"context"
	"encoding/hex"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/storectl/storectl/internal/testutil"
	rscan "github.com/storectl/storectl/pkg/scan/rabbitmq"
)

// TestHardenDummyIDTakenLater: the streaming plan picks dummy ids before
// it has seen the later files. When a file after the first rewritten one
// already holds a record with the first dummy id the plan would hand out
// (as a store an earlier harden rewrote can), the plan must still use no
// id the vhost holds: the same holes, each dummy id one further on.
func TestHardenDummyIDTakenLater(t *testing.T) {
	dir := untarNode(t, testutil.Testdata("rabbitmq-4.0", "datasets", "crash.tar.gz"))
	root, vdir := vhostOf(t, dir)
	cfg := rscan.Config{Root: root, VHostDirs: []string{vdir}}
	_, first, err := PlanHarden(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, h := range first.Holes {
		if h.DummyID != "" {
			ids = append(ids, h.DummyID)
		}
	}
	if len(ids) == 0 {
		t.Fatal("the first plan writes no dummy record: nothing to test")
	}
	// A new highest-numbered file holding one record with the first id.
	cur := currentRDQ(t, vdir)
	n, err := strconv.Atoi(strings.TrimSuffix(filepath.Base(cur), ".rdq"))
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := hex.DecodeString(ids[0])
	taken := filepath.Join(filepath.Dir(cur), strconv.Itoa(n+1)+".rdq")
	if err := os.WriteFile(taken, DummyRecord(64, [16]byte(raw)), 0o644); err != nil {
		t.Fatal(err)
	}
	_, second, err := PlanHarden(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	// Planned twice, reported once: the scan's files and findings are the
	// first plan's plus the new file and its one finding.
	if len(second.Scan.Files) != len(first.Scan.Files)+1 || len(second.Scan.Findings) != len(first.Scan.Findings)+1 {
		t.Errorf("the scan behind the plan has %d files and %d findings, want %d and %d",
			len(second.Scan.Files), len(second.Scan.Findings), len(first.Scan.Files)+1, len(first.Scan.Findings)+1)
	}
	var got []string
	for _, h := range second.Holes {
		if h.DummyID == ids[0] {
			t.Errorf("%s@%d: dummy id %s, which %s already holds", h.Path, h.Offset, h.DummyID, filepath.Base(taken))
		}
		if h.DummyID != "" {
			got = append(got, h.DummyID)
		}
	}
	if len(got) != len(ids) {
		t.Fatalf("%d dummy records planned, want %d as before", len(got), len(ids))
	}
	// Counters are handed out in order, skipping only the taken one.
	for i := range ids {
		want := make([]byte, 16)
		copy(want, dummyIDPrefix[:])
		c, _ := strconv.ParseUint(ids[i][24:], 16, 32)
		c++
		want[12], want[13], want[14], want[15] = byte(c>>24), byte(c>>16), byte(c>>8), byte(c)
		if got[i] != hex.EncodeToString(want) {
			t.Errorf("dummy %d: %s, want %x", i, got[i], want)
		}
	}
}
