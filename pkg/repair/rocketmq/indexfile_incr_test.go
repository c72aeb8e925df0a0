package rocketmq

import (
	"context"
	"encoding/binary"
	"os"
	"testing"

	gen "github.com/storectl/storectl/internal/gen/rocketmq"
	scanrmq "github.com/storectl/storectl/pkg/scan/rocketmq"
)

// TestRebuildIndexCutAtRecoveryEnd: a bad body CRC in the second of four
// commitlog files ends the recovery there, while the scan fed the
// incremental index build the records of all four files. The rebuilt
// index must hold only the records before the recovery end (the build is
// redone from them): the staged files pass VerifyStaged (Verify on a view
// of the store with them) and the index ends below the recovery end.
func TestRebuildIndexCutAtRecoveryEnd(t *testing.T) {
	store := t.TempDir()
	sum, err := gen.Generate(store, gen.Config{MappedFileSize: 256 << 10, TotalBytes: 1 << 20, Seed: 7, MaxBody: 2000})
	if err != nil {
		t.Fatal(err)
	}
	if len(sum.Files) < 3 {
		t.Fatalf("generated %d commitlog files, want >= 3", len(sum.Files))
	}
	f, err := os.OpenFile(sum.Files[1], os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	var b [12]byte
	if _, err := f.ReadAt(b[:4], 0); err != nil {
		t.Fatal(err)
	}
	second := int64(binary.BigEndian.Uint32(b[:4])) // the file's second record
	if _, err := f.ReadAt(b[:], second); err != nil {
		t.Fatal(err)
	}
	binary.BigEndian.PutUint32(b[8:], binary.BigEndian.Uint32(b[8:])^0x5a5a) // BODYCRC
	if _, err := f.WriteAt(b[8:12], second+8); err != nil {
		t.Fatal(err)
	}
	f.Close()
	for _, sub := range []string{"consumequeue", "index"} {
		os.RemoveAll(store + "/" + sub)
	}
	cfg := RebuildConfig{DataDir: store, CQFileSize: fxCQSize, IndexSlots: fxIndexSlots, IndexEntries: fxIndexEntries}
	plan, rep := rbTestPlan(t, cfg)
	base := int64(256 << 10)
	if rep.RecoveryEnd != base+second {
		t.Fatalf("recovery end %d, want %d (the damaged record)", rep.RecoveryEnd, base+second)
	}
	if len(rep.IndexFiles) == 0 {
		t.Fatal("no index file rebuilt")
	}
	last := rep.IndexFiles[len(rep.IndexFiles)-1].New
	if last.EndPhyOffset >= rep.RecoveryEnd {
		t.Fatalf("index ends at %d, at or past the recovery end %d", last.EndPhyOffset, rep.RecoveryEnd)
	}
	chk, err := VerifyStaged(context.Background(), cfg, rep)
	if err != nil {
		t.Fatal(err)
	}
	if !chk.OK() {
		t.Fatalf("staged files fail verification: %v", chk.Problems)
	}
	res, err := scanrmq.Verify(context.Background(), scanrmq.VerifyConfig{Config: scanrmq.Config{Root: store}}, scanNoRecords)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d records kept of %d generated, %d index entries in %d files, %d actions; %d index entries cross-checked; verify before apply: %d findings",
		rep.Records, sum.Messages, rep.IndexKeys, len(rep.IndexFiles), len(plan.Actions), chk.EntriesChecked, len(res.Findings))
}
