package salvage

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/storectl/storectl/internal/testutil"
	"github.com/storectl/storectl/pkg/scan"
	dlscan "github.com/storectl/storectl/pkg/scan/dledger"
	timerscan "github.com/storectl/storectl/pkg/scan/timer"
)

func untar5x(t *testing.T, ds string) string {
	return filepath.Join(testutil.Untar(t, testutil.Testdata("rocketmq-5x", "rmq533-"+ds+".tar.gz")), "store")
}

// TestTimerLost: with T1's commitlog cut by a body CRC error in the
// record of timer message 150 (at 163604, TopicB), the timer messages
// whose records now lie past the recovery end never fire; salvage
// --select lost exports each one as a message of its real topic, with its
// deliver time, and nothing else.
func TestTimerLost(t *testing.T) {
	store := untar5x(t, "t1-clean")
	f, err := os.OpenFile(filepath.Join(store, "commitlog", "00000000000000000000"), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte{0x55}, 163604+200); err != nil {
		t.Fatal(err)
	}
	f.Close()
	cfg := timerscan.Config{Root: store, RecoveryEnd: -1, Now: time.UnixMilli(1796163834084)}
	w, err := Create(filepath.Join(t.TempDir(), "out"), store)
	if err != nil {
		t.Fatal(err)
	}
	rep := &Report{By: map[string]int{}}
	if err := ExportTimerLost(context.Background(), cfg, Options{Select: []Selection{SelectLost}}, w, rep); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	res, err := timerscan.Scan(context.Background(), cfg, scanOptions())
	if err != nil {
		t.Fatal(err)
	}
	lost := res.Extra["timer"].(*timerscan.Summary).Recovery.Lost
	if rep.Selected != lost || lost == 0 || len(rep.Notes) != 0 {
		t.Fatalf("exported %d of %d lost timer messages; notes %v", rep.Selected, lost, rep.Notes)
	}
	msgs, err := w.Messages()
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range msgs {
		if m.Topic != m.Properties[timerscan.PropRealTopic] || m.Topic == timerscan.Topic || m.Properties[timerscan.PropOutMs] == nil {
			t.Fatalf("exported as %s: %+v", m.Topic, m.Properties)
		}
	}
	t.Logf("%d lost timer messages exported with their real topic and deliver time", rep.Selected)
}

// TestDLedgerAfterCorruption: DL3's 38 entries past where DLedger's
// recovery stops are exported by after-corruption; all exports all 300.
func TestDLedgerAfterCorruption(t *testing.T) {
	store := untar5x(t, "dl3-hdr")
	for _, c := range []struct {
		sel  Selection
		want int
	}{{SelectAfterCorruption, 38}, {SelectAll, 300}} {
		w, err := Create(filepath.Join(t.TempDir(), "out"), store)
		if err != nil {
			t.Fatal(err)
		}
		rep := &Report{By: map[string]int{}}
		cfg := dlscan.Config{Root: store, Dir: filepath.Join(store, "dledger-n0")}
		if err := ExportDLedger(context.Background(), cfg, Options{Select: []Selection{c.sel}}, w, rep); err != nil {
			t.Fatal(err)
		}
		w.Close()
		if rep.Selected != c.want || rep.Skipped != 0 {
			t.Errorf("%s: %d exported, %d skipped, want %d", c.sel, rep.Selected, rep.Skipped, c.want)
		}
	}
}

func scanOptions() scan.Options { return scan.Options{} }
