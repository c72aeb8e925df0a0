package timer

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"github.com/storectl/storectl/internal/testutil"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	gen5x "github.com/storectl/storectl/internal/gen/rocketmq5x"
	rmq "github.com/storectl/storectl/pkg/format/rocketmq"
	ftimer "github.com/storectl/storectl/pkg/format/timer"
	"github.com/storectl/storectl/pkg/scan"
	rmqscan "github.com/storectl/storectl/pkg/scan/rocketmq"
)

// scanOverlapped is the timer scan as the CLI runs it: Prepare, Begin (the
// timer walk on its own goroutine), the commitlog scan with the prepass
// tap, then Scan, which finishes the begun walk with the recovery end.
// It fails the test unless Scan did finish that walk (not a fresh one),
// the tap collected the commitlog's tail for it, and its spans hold every
// unit it walked.
func scanOverlapped(t *testing.T, store string, cfg Config) *scan.Result {
	t.Helper()
	res, _ := scanOverlappedBy(t, store, cfg)
	return res
}

// scanOverlappedBy is scanOverlapped, also returning the scanner that
// finished the walk.
func scanOverlappedBy(t *testing.T, store string, cfg Config) (*scan.Result, *scanner) {
	t.Helper()
	ctx := context.Background()
	pre, err := Prepare(ctx, store)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Root = store
	pre.Begin(ctx, cfg, scan.Options{})
	e := pre.early
	if e == nil {
		t.Fatal("Begin started no walk")
	}
	cl, err := rmqscan.ScanCommitLog(ctx, rmqscan.Config{Root: store, Tap: pre.Tap}, scan.Options{Jobs: 2})
	if err != nil {
		t.Fatal(err)
	}
	pre.CommitLogScanned(cl.Files)
	cfg.RecoveryEnd, cfg.Prepass = *cl.RecoveryEnd, pre
	res, err := Scan(ctx, cfg, scan.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if pre.early != nil || !e.s.deferTargets || e.s.res != res {
		t.Fatal("Scan did not finish the walk Begin started")
	}
	if e.s.cpPresent && (e.s.tail == nil || !e.s.tapTail) {
		t.Error("the commitlog's tail was not read by the tap of the commitlog scan")
	}
	n := 0
	for _, sp := range e.s.spans {
		n += sp.n
		if sp.end-sp.pos != int64(sp.n)*52 {
			t.Errorf("span %+v: its length is not its units", sp)
		}
	}
	if n != e.s.units {
		t.Errorf("the spans hold %d units, the walk walked %d", n, e.s.units)
	}
	return res, e.s
}

func sameJSON(t *testing.T, what string, want, got *scan.Result) {
	t.Helper()
	ja, _ := json.Marshal(want)
	jb, _ := json.Marshal(got)
	if !bytes.Equal(ja, jb) {
		t.Errorf("%s differs:\nsequential %s\noverlapped %s", what, ja, jb)
	}
}

// TestOverlapMismatch: a Scan whose Config is not the one Begin was given
// (another start time) does not take the begun walk: it stops it and
// scans on its own, with the result of a plain Scan; Stop ends a walk no
// Scan takes, and a second Stop is harmless.
func TestOverlapMismatch(t *testing.T) {
	ctx := context.Background()
	store := fixture(t, "t2-kill")
	now := time.UnixMilli(1796163902000)
	want, err := Scan(ctx, Config{Root: store, RecoveryEnd: -1, Now: now}, scan.Options{})
	if err != nil {
		t.Fatal(err)
	}
	pre, err := Prepare(ctx, store)
	if err != nil {
		t.Fatal(err)
	}
	pre.Begin(ctx, Config{Root: store, Now: now.Add(-time.Hour)}, scan.Options{})
	if _, ok := pre.Begun(); !ok {
		t.Fatal("Begin started no walk")
	}
	got, err := Scan(ctx, Config{Root: store, RecoveryEnd: -1, Now: now, Prepass: pre}, scan.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := pre.Begun(); ok {
		t.Error("the mismatched walk is still waiting")
	}
	// The prepass's marks were never set (no tapped commitlog scan): the
	// scan looks every target up itself.
	sameJSON(t, "a Scan with another start time", want, got)

	pre.Begin(ctx, Config{Root: store, Now: now}, scan.Options{})
	e := pre.early
	pre.Stop()
	pre.Stop()
	select {
	case <-e.done:
	default:
		t.Error("Stop returned before the walk ended")
	}
	if _, ok := pre.Begun(); ok {
		t.Error("a stopped walk is still waiting")
	}
	var none *Prepass
	none.Begin(ctx, Config{Root: store}, scan.Options{})
	none.Stop()
	if _, ok := none.Begun(); ok {
		t.Error("a nil Prepass began a walk")
	}
	pre.Begin(ctx, Config{Root: store, Now: now}, scan.Options{Records: func(any) error { return nil }})
	if _, ok := pre.Begun(); ok {
		t.Error("Begin with a Records callback began a walk")
	}
}

// TestOverlapEndBeforeMarks: a record early in the commitlog is damaged,
// so its recovery ends there, while the commitlog scan still reads (and
// the tap marks) the records of the files after it: the units pointing
// past the end are marked, yet the overlapped scan must not settle their
// spans on the marks alone. It reports them beyond the end as a
// sequential scan does.
func TestOverlapEndBeforeMarks(t *testing.T) {
	store := filepath.Join(t.TempDir(), "timer")
	sum, err := gen5x.GenerateTimer(store, gen5x.Config{TotalBytes: 6 << 20, FileSize: 1 << 20, TimerLogFileSize: 64 << 10, SpacingMs: 1000, Seed: 5})
	if err != nil {
		t.Fatal(err)
	}
	// The first unit pointing into commitlog file 2 and one into file 4.
	var in2, in4 ftimer.Unit
	names, _ := filepath.Glob(filepath.Join(store, LogDir, "*"))
	for _, p := range names {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		for pos := 0; pos+ftimer.UnitSize <= len(b); pos += ftimer.UnitSize {
			e, _ := ftimer.DecodeEntry(b[pos:], int64(pos))
			if e.Kind != ftimer.EntryUnit {
				break
			}
			if f := e.Unit.OffsetPy >> 20; f == 2 && in2.Size == 0 {
				in2 = e.Unit
			} else if f == 4 && in4.Size == 0 {
				in4 = e.Unit
			}
		}
	}
	if in2.Size == 0 || in4.Size == 0 {
		t.Fatalf("no units into commitlog files 2 and 4 (%d units)", sum.Units)
	}
	// Its magic code: recovery stops at this record.
	patch(t, filepath.Join(store, "commitlog", fmtName(2<<20)), in2.OffsetPy-2<<20+4, be32(0x12345678))
	testutil.RecoverFromFirstFile(t, store)
	cp, err := ftimer.DecodeCheckpoint(readAt(t, filepath.Join(store, CheckFile), 0, ftimer.CheckpointSize), 0)
	if err != nil {
		t.Fatal(err)
	}
	now := time.UnixMilli(cp.LastReadTimeMs + 1000)
	pre := scanTapped(t, store, now)
	if !pre.clean(in4.Offset) {
		t.Fatal("the unit into commitlog file 4 is not marked: the test needs marks past the recovery end")
	}
	res := scanOverlapped(t, store, Config{Now: now})
	n := 0
	for _, f := range res.Findings {
		if f.Code == CodeUnitBeyondEnd {
			n++
		}
	}
	if n == 0 {
		t.Fatal("no unit reported beyond the recovery end")
	}
	t.Logf("%d units beyond the recovery end reported", n)
}

// TestOverlapTapTail: the re-puts the tap collects for readTail are those
// FileCommitLog.Tail finds (a broker's store with delivered timer
// messages); with another record limit the begun walk reads the tail
// itself, and where the tap's walk may not have been Tail's (a file count
// that does not match, no count at all) Scan reads it; the result is the
// same each way.
func TestOverlapTapTail(t *testing.T) {
	ctx := context.Background()
	store := fixture(t, "t1-clean")
	now := time.UnixMilli(1796163834084)
	want, err := Scan(ctx, Config{Root: store, RecoveryEnd: -1, Now: now}, scan.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name    string
		maxSize int
		files   func([]scan.File) []scan.File
		tapped  bool
	}{
		{"as the CLI", 0, func(f []scan.File) []scan.File { return f }, true},
		{"another record limit", 1 << 20, func(f []scan.File) []scan.File { return f }, false},
		{"a count off by one", 0, func(f []scan.File) []scan.File {
			f = append([]scan.File(nil), f...)
			for i := range f {
				f[i].Records++
			}
			return f
		}, false},
		{"no commitlog files", 0, func([]scan.File) []scan.File { return nil }, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			pre, err := Prepare(ctx, store)
			if err != nil {
				t.Fatal(err)
			}
			cfg := Config{Root: store, Now: now}
			pre.TapMaxSize = c.maxSize
			pre.Begin(ctx, cfg, scan.Options{})
			e := pre.early
			cl, err := rmqscan.ScanCommitLog(ctx, rmqscan.Config{Root: store, Tap: pre.Tap, MaxMessageSize: c.maxSize}, scan.Options{Jobs: 2})
			if err != nil {
				t.Fatal(err)
			}
			pre.CommitLogScanned(c.files(cl.Files))
			cfg.RecoveryEnd, cfg.Prepass = *cl.RecoveryEnd, pre
			got, err := Scan(ctx, cfg, scan.Options{})
			if err != nil {
				t.Fatal(err)
			}
			if tapped := e.s.tapTail && e.s.tail != nil; tapped != c.tapped {
				t.Fatalf("tail from the tap: %v, want %v", tapped, c.tapped)
			}
			if c.maxSize != 0 && (e.s.tapTail || e.s.tail == nil) {
				t.Error("with another record limit the walk did not read the tail beside the commitlog scan")
			}
			if c.tapped {
				fc, err := NewFileCommitLog(rmqscan.Config{Root: store})
				if err != nil {
					t.Fatal(err)
				}
				defer fc.Close()
				var reputs []reput
				if err := fc.Tail(ctx, e.s.cp.LastReadTimeMs-60_000, func(m *rmq.Message, phy int64) error {
					if k, ok := reputKey(m); ok {
						reputs = append(reputs, reput{k, phy})
					}
					return nil
				}); err != nil {
					t.Fatal(err)
				}
				if len(reputs) == 0 {
					t.Fatal("the fixture's tail holds no re-puts")
				}
				if !slices.Equal(reputs, e.s.tail.reputs) {
					t.Errorf("the tap collected %d re-puts, Tail finds %d:\n%v\n%v", len(e.s.tail.reputs), len(reputs), e.s.tail.reputs, reputs)
				}
			}
			sameJSON(t, "the scan with the tail "+c.name, want, got)
		})
	}
}

// TestTapKeepsTargets: the prepass tap keeps the targets of the marked
// units Scan keeps the ids of (pending, expired; Prepass.captureFrom), so
// checkTargets does not look their records up again, and the result is
// the sequential Scan's; with fewer kept than those units (PendingCache
// bounds them) the rest are looked up, with the same result.
func TestTapKeepsTargets(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		ds    string
		nowMs int64
	}{{"t1-clean", 1796163834084}, {"t2-kill", 1796163902000}, {"t3-cltrunc", 1796163964732},
		{"t1-clean", 1796163774000 + 8*86400_000}} { // every unit expired
		for _, pc := range []int{0, 3} {
			t.Run(fmt.Sprintf("%s@%d/cache%d", c.ds, c.nowMs, pc), func(t *testing.T) {
				store := fixture(t, c.ds)
				cfg := Config{Now: time.UnixMilli(c.nowMs), PendingCache: pc}
				want, err := Scan(ctx, Config{Root: store, RecoveryEnd: -1, Now: cfg.Now, PendingCache: pc}, scan.Options{})
				if err != nil {
					t.Fatal(err)
				}
				got, s := scanOverlappedBy(t, store, cfg)
				sameJSON(t, "the timer scan with the tap's targets", want, got)
				if s.keptUsed == 0 {
					t.Error("checkTargets used none of the tap's targets")
				}
				if len(s.kept) > s.cfg.PendingCache {
					t.Errorf("the tap kept %d targets, more than the %d it may", len(s.kept), s.cfg.PendingCache)
				}
			})
		}
	}
}
