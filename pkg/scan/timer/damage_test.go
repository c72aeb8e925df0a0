package timer

import (
	"context"
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	ftimer "github.com/storectl/storectl/pkg/format/timer"
	"github.com/storectl/storectl/pkg/scan"
)

func patch(t *testing.T, path string, off int64, b []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

func be32(v uint32) []byte { return binary.BigEndian.AppendUint32(nil, v) }
func be64(v uint64) []byte { return binary.BigEndian.AppendUint64(nil, v) }

func findAt(t *testing.T, res *scan.Result, code, path string, off int64) scan.Finding {
	t.Helper()
	for _, f := range res.Findings {
		if f.Code == code && f.Path == path && f.Offset == off {
			return f
		}
	}
	t.Fatalf("no %s at %s@%d; findings: %v", code, path, off, res.Findings)
	return scan.Finding{}
}

// TestDamage: a unit with a bad magic, a broken prevPos chain and a wheel
// slot past the timerlog, each made in a copy of T1, are found at their
// file and offset.
func TestDamage(t *testing.T) {
	now := time.UnixMilli(1796163834084) // T1's restart
	run := func(store string) *scan.Result {
		res, err := Scan(context.Background(), Config{Root: store, RecoveryEnd: -1, Now: now}, scan.Options{})
		if err != nil {
			t.Fatal(err)
		}
		sameJSON(t, "the damaged store's timer scan begun beside the commitlog scan", res, scanOverlapped(t, store, Config{Now: now}))
		return res
	}
	t.Run("bad-magic", func(t *testing.T) {
		store := private(t, "t1-clean")
		// Unit 10 of the last file (in the recovery walk): magic 0x10.
		patch(t, filepath.Join(store, "timerlog", "00000000000000008192"), 10*ftimer.UnitSize+12, be32(0x10))
		res := run(store)
		f := findAt(t, res, CodeLogBadMagic, "timerlog/00000000000000008192", 10*ftimer.UnitSize)
		if f.Severity != scan.Error {
			t.Errorf("severity %v", f.Severity)
		}
		d := findAt(t, res, CodeLogDropped, "timerlog/00000000000000008192", 10*ftimer.UnitSize)
		if n := d.Details["units"]; n != 42-11 {
			t.Errorf("%v units dropped, want the 31 after the damaged one", n)
		}
		if got := res.Extra["timer"].(*Summary).Recovery.ProcessOffset; got != 8192+10*ftimer.UnitSize {
			t.Errorf("process offset %d", got)
		}
	})
	t.Run("broken-prev", func(t *testing.T) {
		store := private(t, "t1-clean")
		// Unit 20 of file 0 (slot chains run through it): prevPos 7.
		patch(t, filepath.Join(store, "timerlog", "00000000000000000000"), 20*ftimer.UnitSize+4, be64(7))
		res := run(store)
		findAt(t, res, CodeLogBadPrev, "timerlog/00000000000000000000", 20*ftimer.UnitSize+4)
	})
	t.Run("slot-past-timerlog", func(t *testing.T) {
		store := private(t, "t1-clean")
		const idx = 1117360 // a non-empty slot of T1
		patch(t, filepath.Join(store, "timerwheel"), idx*ftimer.SlotSize+16, be64(999999))
		res := run(store)
		f := findAt(t, res, CodeWheelPastLog, "timerwheel", idx*ftimer.SlotSize)
		if f.Severity != scan.Error {
			t.Errorf("severity %v", f.Severity)
		}
	})
}

// TestT3UnitsPastEnd: verify names every unit of T3 that points at or
// past the truncated commitlog's end, at its file and offset.
func TestT3UnitsPastEnd(t *testing.T) {
	res, sum := scanDS(t, fixture(t, "t3-cltrunc"), 1796163964732)
	want := 0
	for _, ln := range readUnits(t, "t3-cltrunc") {
		if ln.OffsetPy < sum.CommitLogEnd {
			continue
		}
		want++
		code := CodeUnitBeyondEnd
		if ln.OffsetPy == sum.CommitLogEnd {
			code = CodeUnitAtRecoveryEnd
		}
		findAt(t, res, code, "timerlog/"+ln.File, ln.Pos)
	}
	t.Logf("%d units at or past the recovery end %d, each named", want, sum.CommitLogEnd)
	if want == 0 {
		t.Fatal("no unit past the end")
	}
}

// TestTTLExpired: started more than 7 days after its checkpoint's read
// time, the broker skips the due messages before the oldest slot it still
// reads; the scan reports them, and none of them as restored.
func TestTTLExpired(t *testing.T) {
	res, sum := scanDS(t, fixture(t, "t1-clean"), 1796163774000+8*86400_000)
	f := findAt(t, res, CodeTTLExpired, "timerlog/00000000000000000000", 52)
	if n := f.Details["units"]; n != 170 {
		t.Errorf("%v units expired, want T1's 170 pending", n)
	}
	if sum.Recovery.Restore != 0 {
		t.Errorf("%d restored", sum.Recovery.Restore)
	}
}

// TestFIFOs: a named pipe in place of the checkpoint, a timerlog file or
// the wheel is refused at once (never opened for a read that would block)
// and named in the result.
func TestFIFOs(t *testing.T) {
	for _, rel := range []string{"config/timercheck", "timerlog/00000000000000004096", "timerwheel"} {
		store := private(t, "t1-clean")
		p := filepath.Join(store, filepath.FromSlash(rel))
		if err := os.Remove(p); err != nil {
			t.Fatal(err)
		}
		if err := syscall.Mkfifo(p, 0o644); err != nil {
			t.Skipf("mkfifo: %v", err)
		}
		done := make(chan *scan.Result, 1)
		go func() {
			res, _ := Scan(context.Background(), Config{Root: store, RecoveryEnd: -1, Now: time.UnixMilli(1796163834084)}, scan.Options{})
			done <- res
		}()
		select {
		case res := <-done:
			named := false
			for _, e := range res.Errors {
				named = named || strings.Contains(e, rel)
			}
			for _, f := range res.Findings {
				named = named || f.Path == rel
			}
			if !named {
				t.Errorf("%s as a FIFO: not named (errors %v)", rel, res.Errors)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("%s as a FIFO: the scan hangs", rel)
		}
	}
}
