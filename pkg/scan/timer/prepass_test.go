package timer

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	gen5x "github.com/storectl/storectl/internal/gen/rocketmq5x"
	ftimer "github.com/storectl/storectl/pkg/format/timer"
	"github.com/storectl/storectl/pkg/scan"
	rmqscan "github.com/storectl/storectl/pkg/scan/rocketmq"
)

// scanTapped scans store's commitlog and timer store twice, as the CLI
// did before the prepass (the timer scan reads every record itself) and
// with it (the commitlog scan's Tap checks the records), and fails the
// test unless both give the same results, and the same as the overlapped
// scan (scanOverlapped). It returns the prepass.
func scanTapped(t *testing.T, store string, now time.Time) *Prepass {
	t.Helper()
	ctx := context.Background()
	opts := scan.Options{Jobs: 2}
	plainCL, err := rmqscan.ScanCommitLog(ctx, rmqscan.Config{Root: store}, opts)
	if err != nil {
		t.Fatal(err)
	}
	end := *plainCL.RecoveryEnd
	plain, err := Scan(ctx, Config{Root: store, RecoveryEnd: end, Now: now}, scan.Options{})
	if err != nil {
		t.Fatal(err)
	}
	fds := openFiles(t)
	pre, err := Prepare(ctx, store)
	if err != nil {
		t.Fatal(err)
	}
	tappedCL, err := rmqscan.ScanCommitLog(ctx, rmqscan.Config{Root: store, Tap: pre.Tap}, opts)
	if err != nil {
		t.Fatal(err)
	}
	if n := openFiles(t); n != fds {
		t.Errorf("%d files open after the tapped commitlog scan, %d before: the taps keep descriptors", n, fds)
	}
	tapped, err := Scan(ctx, Config{Root: store, RecoveryEnd: end, Now: now, Prepass: pre}, scan.Options{})
	if err != nil {
		t.Fatal(err)
	}
	same := func(what string, a, b *scan.Result) {
		ja, _ := json.Marshal(a)
		jb, _ := json.Marshal(b)
		if !bytes.Equal(ja, jb) {
			t.Errorf("%s differs with the prepass:\nwithout %s\nwith    %s", what, ja, jb)
		}
	}
	same("the commitlog scan", plainCL, tappedCL)
	same("the timer scan", plain, tapped)
	// And with the timer walk beside the commitlog scan (Begin), as the
	// CLI runs it.
	sameJSON(t, "the timer scan begun beside the commitlog scan", plain, scanOverlapped(t, store, Config{Now: now}))
	return pre
}

// TestPrepassFixtures: on T1-T3 the timer scan with the commitlog scan's
// prepass finds what it finds reading the records itself.
func TestPrepassFixtures(t *testing.T) {
	for _, c := range []struct {
		ds    string
		nowMs int64
	}{{"t1-clean", 1796163834084}, {"t2-kill", 1796163902000}, {"t3-cltrunc", 1796163964732},
		{"t1-clean", 1796163774000 + 8*86400_000}} { // a start past the wheel's 7 days: every unit is expired
		t.Run(c.ds, func(t *testing.T) {
			pre := scanTapped(t, fixture(t, c.ds), time.UnixMilli(c.nowMs))
			n, units := pre.Marked()
			t.Logf("%d of %d units marked", n, units)
			if units == 0 {
				t.Fatal("no unit indexed")
			}
		})
	}
}

// TestPrepassDamage: a generated store of several commitlog files with
// targets the tap must not vouch for (a record whose TIMER_OUT_MS was
// changed, units swapped out of record order, a unit pointing into a
// record): the results are the same with and without the prepass, most
// units are marked, and the damaged ones are not.
func TestPrepassDamage(t *testing.T) {
	store := filepath.Join(t.TempDir(), "timer")
	// One message a second over 6 MiB: most units are due before the
	// checkpoint's read time (not pending), so the scan leans on the marks.
	sum, err := gen5x.GenerateTimer(store, gen5x.Config{TotalBytes: 6 << 20, FileSize: 1 << 20, TimerLogFileSize: 64 << 10, SpacingMs: 1000, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	// Where each unit is: the timerlog files in order, units up to the BLANK.
	type unitAt struct {
		path string
		pos  int64
		u    ftimer.Unit
	}
	var units []unitAt
	names, _ := filepath.Glob(filepath.Join(store, LogDir, "*"))
	for _, p := range names {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		base, err := strconv.ParseInt(filepath.Base(p), 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		for pos := int64(0); pos+ftimer.UnitSize <= int64(len(b)); pos += ftimer.UnitSize {
			e, _ := ftimer.DecodeEntry(b[pos:], base+pos)
			if e.Kind != ftimer.EntryUnit {
				break
			}
			units = append(units, unitAt{p, pos, e.Unit})
		}
	}
	if len(units) != sum.Units {
		t.Fatalf("%d units found, %d written", len(units), sum.Units)
	}
	offsetPy := func(v int64, size int32) []byte {
		return binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint64(nil, uint64(v)), uint32(size))
	}
	// 1. The record of unit 100 gets another TIMER_OUT_MS digit
	// (properties are not under the body CRC: the walk still takes it).
	u := units[100].u
	clPath := filepath.Join(store, "commitlog", fmtName(u.OffsetPy/(1<<20)*(1<<20)))
	rec := readAt(t, clPath, u.OffsetPy%(1<<20), int(u.SizePy))
	i := bytes.Index(rec, []byte(PropOutMs+"\x01"))
	if i < 0 {
		t.Fatal("no TIMER_OUT_MS in the record")
	}
	at := int64(i + len(PropOutMs) + 1 + 8)
	rec[at] = '0' + (rec[at]-'0'+1)%10
	patch(t, clPath, u.OffsetPy%(1<<20)+at, rec[at:at+1])
	// 2. Units 2000 and 2001 swap their records (out of order for the tap).
	a, b := units[2000], units[2001]
	patch(t, a.path, a.pos+28, offsetPy(b.u.OffsetPy, b.u.SizePy))
	patch(t, b.path, b.pos+28, offsetPy(a.u.OffsetPy, a.u.SizePy))
	// 3. Unit 3000 points 4 bytes into its record.
	c := units[3000]
	patch(t, c.path, c.pos+28, offsetPy(c.u.OffsetPy+4, c.u.SizePy))

	cp, err := ftimer.DecodeCheckpoint(readAt(t, filepath.Join(store, CheckFile), 0, ftimer.CheckpointSize), 0)
	if err != nil {
		t.Fatal(err)
	}
	pre := scanTapped(t, store, time.UnixMilli(cp.LastReadTimeMs+1000))
	n, indexed := pre.Marked()
	t.Logf("%d of %d units marked (%d pending)", n, indexed, sum.Pending)
	if indexed != sum.Units || n < int64(sum.Units-sum.Pending)/2 || n > int64(sum.Units-4) {
		t.Errorf("%d of %d units marked, %d indexed, %d pending", n, sum.Units, indexed, sum.Pending)
	}
	for _, k := range []int{100, 2000, 2001, 3000} {
		if pre.clean(units[k].u.Offset) {
			t.Errorf("damaged unit %d is marked", k)
		}
	}
	// What the damage makes the scan report (the same with the prepass).
	res, err := Scan(context.Background(), Config{Root: store, RecoveryEnd: -1, Now: time.UnixMilli(cp.LastReadTimeMs + 1000), Prepass: pre}, scan.Options{})
	if err != nil {
		t.Fatal(err)
	}
	rel := func(p string) string { r, _ := filepath.Rel(store, p); return r }
	findAt(t, res, CodeUnitDeliverTime, rel(units[100].path), units[100].pos)
	findAt(t, res, CodeUnitDeliverTime, rel(a.path), a.pos)
	findAt(t, res, CodeUnitNotRecord, rel(c.path), c.pos)
}

func fmtName(base int64) string { return fmt.Sprintf("%020d", base) }

func readAt(t *testing.T, path string, off int64, n int) []byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, n)
	if _, err := f.ReadAt(b, off); err != nil {
		t.Fatal(err)
	}
	return b
}

// openFiles counts this process's open descriptors (-1 without /proc).
func openFiles(t *testing.T) int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return -1
	}
	return len(ents)
}
