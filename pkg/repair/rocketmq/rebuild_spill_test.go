package rocketmq

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	gen "github.com/storectl/storectl/internal/gen/rocketmq"
	"github.com/storectl/storectl/internal/testutil"
)

// planJSON is a plan and its report as JSON, without what differs from
// run to run (the stage dir's name, the plan's creation time, hashes of
// staged files made at different times are the same bytes: kept).
func planJSON(t *testing.T, cfg RebuildConfig) string {
	t.Helper()
	p, rep, err := PlanRebuildIndex(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer rep.RemoveStage()
	rep.StageDir = ""
	for i := range p.Actions {
		if s := p.Actions[i].Source; s != "" {
			p.Actions[i].Source = filepath.Base(filepath.Dir(s)) + "/" + filepath.Base(s)
		}
	}
	b, err := json.Marshal(struct {
		Actions any
		Report  *RebuildReport
	}{p.Actions, rep})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestRebuildSpillMatchesMemory: the consume queues rebuilt through the
// external sort's spilled runs (runs of 7 units: hundreds of runs, merged
// in several passes) give exactly the plan and report of the same sort
// held in memory (one run, never written), on every RocketMQ fixture and
// on a generated store with many queues and a damaged tail, and leave no
// run file open.
func TestRebuildSpillMatchesMemory(t *testing.T) {
	tarballs, _ := filepath.Glob(testutil.Testdata("rocketmq", "*.tar.gz"))
	var roots []string
	for _, tb := range tarballs {
		roots = append(roots, filepath.Join(testutil.Untar(t, tb), "store"))
	}
	g := t.TempDir()
	sum, err := gen.Generate(g, gen.Config{MappedFileSize: 256 << 10, TotalBytes: 1 << 20, Seed: 5, BodyMin: 10, BodyMax: 300, MaxBody: 300,
		Topics: 6, QueuesPerTopic: 3})
	if err != nil {
		t.Fatal(err)
	}
	damageBodyCRC(t, sum.Files[2]) // the recovery ends in the third file: records past it are left out
	testutil.RecoverFromFirstFile(t, g)
	roots = append(roots, g)
	for _, root := range roots {
		cfg := RebuildConfig{DataDir: root, KeepStage: true}
		mem := cfg
		mem.runLen = 1 << 30
		spill := cfg
		spill.runLen = 7
		a, b := planJSON(t, mem), planJSON(t, spill)
		if a != b {
			t.Fatalf("%s: the plan through spilled runs differs from the one in memory:\n%s\n%s", root, a, b)
		}
		if n := testutil.OpenFiles(t, "storectl-sort-"); n != 0 {
			t.Fatalf("%s: %d sort run files left open", root, n)
		}
	}
}

// TestRebuildSpillGoneAfterError: a plan that fails after the consume
// queue sort spilled (a queue offset jump too large to fill) leaves no run
// file open either.
func TestRebuildSpillGoneAfterError(t *testing.T) {
	g := t.TempDir()
	sum, err := gen.Generate(g, gen.Config{MappedFileSize: 256 << 10, TotalBytes: 512 << 10, Seed: 6, BodyMin: 10, BodyMax: 300, MaxBody: 300})
	if err != nil {
		t.Fatal(err)
	}
	// Move a record's queue offset far ahead: rebuilding its queue would
	// need more than a file of placeholders, which the plan refuses.
	f, err := os.OpenFile(sum.Files[1], os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], 1<<40)
	if _, err := f.WriteAt(b[:], 20); err != nil { // the file's first record's QUEUEOFFSET (no CRC covers it)
		t.Fatal(err)
	}
	f.Close()
	_, _, err = PlanRebuildIndex(context.Background(), RebuildConfig{DataDir: g, CQFileSize: 1000, runLen: 5})
	if err == nil || !strings.Contains(err.Error(), "refusing to fill the gap") {
		t.Fatalf("plan error %v, want the gap refusal", err)
	}
	if n := testutil.OpenFiles(t, "storectl-sort-"); n != 0 {
		t.Fatalf("%d sort run files left open after the failed plan", n)
	}
}

// damageBodyCRC flips the body CRC of the second record of a commitlog file.
func damageBodyCRC(t *testing.T, file string) {
	t.Helper()
	f, err := os.OpenFile(file, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var b [12]byte
	if _, err := f.ReadAt(b[:4], 0); err != nil {
		t.Fatal(err)
	}
	second := int64(binary.BigEndian.Uint32(b[:4]))
	if _, err := f.ReadAt(b[:], second); err != nil {
		t.Fatal(err)
	}
	binary.BigEndian.PutUint32(b[8:], binary.BigEndian.Uint32(b[8:])^0x5a5a)
	if _, err := f.WriteAt(b[8:12], second+8); err != nil {
		t.Fatal(err)
	}
}
