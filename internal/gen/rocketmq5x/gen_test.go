package rocketmq5x

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/storectl/storectl/pkg/scan"
	dlscan "github.com/storectl/storectl/pkg/scan/dledger"
	timerscan "github.com/storectl/storectl/pkg/scan/timer"
)

// TestGeneratedStoresScanClean: small generated stores have no finding
// above info: the timer prediction restores every pending unit and loses
// none; DLedger recovers every entry and commits it.
func TestGeneratedStoresScanClean(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "timer")
	sum, err := GenerateTimer(dir, Config{FileSize: 1 << 20, TotalBytes: 3 << 20, TimerLogFileSize: 64 << 10, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	res, err := timerscan.Scan(context.Background(), timerscan.Config{Root: dir, RecoveryEnd: -1, Now: time.UnixMilli(1796163754000 + int64(sum.Messages)*10)}, scan.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range res.Findings {
		if f.Severity > scan.Info {
			t.Fatalf("generated timer store: %+v", f)
		}
	}
	rc := res.Extra["timer"].(*timerscan.Summary).Recovery
	if rc.Restore != sum.Pending || rc.Lost != 0 || rc.Duplicates != 0 || sum.Pending == 0 {
		t.Fatalf("restore %d lost %d dup %d, %d pending generated", rc.Restore, rc.Lost, rc.Duplicates, sum.Pending)
	}
	dl := filepath.Join(t.TempDir(), "dl")
	dsum, err := GenerateDLedger(dl, Config{FileSize: 1 << 20, TotalBytes: 3 << 20, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	dres, err := dlscan.Scan(context.Background(), dlscan.Config{Root: dl}, scan.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range dres.Findings {
		if f.Severity > scan.Info {
			t.Fatalf("generated DLedger store: %+v", f)
		}
	}
	drc := dres.Extra["dledger"].(*dlscan.Recovery)
	if drc.LedgerEndIndex != int64(dsum.Messages-1) || drc.CommittedPos != dsum.End {
		t.Fatalf("end index %d (want %d), committed pos %d (want %d)", drc.LedgerEndIndex, dsum.Messages-1, drc.CommittedPos, dsum.End)
	}
}
