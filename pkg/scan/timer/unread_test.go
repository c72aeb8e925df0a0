package timer

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/storectl/storectl/pkg/scan"
)

// unreadable replaces the timerlog file rel of store by what kind says: a
// named pipe ("fifo"), a directory ("dir"), or the file with mode 000
// ("mode000", which only a process without CAP_DAC_OVERRIDE cannot read:
// the test is skipped as root).
func unreadable(t *testing.T, store, rel, kind string) {
	t.Helper()
	p := filepath.Join(store, filepath.FromSlash(rel))
	switch kind {
	case "mode000":
		if os.Geteuid() == 0 {
			t.Skip("mode 000 does not stop root from reading the file: run the test as another user (cmd/storectl's TestUnreadTimerlogFile covers it as nobody)")
		}
		if err := os.Chmod(p, 0); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Chmod(p, 0o644) }) // so that TempDir's cleanup can remove it
		return
	}
	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
	switch kind {
	case "fifo":
		if err := syscall.Mkfifo(p, 0o644); err != nil {
			t.Skipf("mkfifo: %v", err)
		}
	case "dir":
		if err := os.Mkdir(p, 0o755); err != nil {
			t.Fatal(err)
		}
	default:
		t.Fatalf("kind %q", kind)
	}
}

// scanInTime is Scan, failing the test if it has not returned after 20 s
// (a FIFO opened for reading blocks until a writer comes).
func scanInTime(t *testing.T, cfg Config) *scan.Result {
	t.Helper()
	type out struct {
		res *scan.Result
		err error
	}
	done := make(chan out, 1)
	go func() {
		res, err := Scan(context.Background(), cfg, scan.Options{})
		done <- out{res, err}
	}()
	select {
	case o := <-done:
		if o.err != nil {
			t.Fatal(o.err)
		}
		return o.res
	case <-time.After(20 * time.Second):
		t.Fatal("the scan hangs")
	}
	return nil
}

// aboutUnread reports whether finding f is about the unread file rel: it
// names rel or waits on it.
func aboutUnread(f scan.Finding, rel string) bool {
	if f.Path == rel {
		return true
	}
	w, _ := f.Details["waits_on"].([]string)
	return slices.Contains(w, rel)
}

// TestUnreadTimerlogFile: a timerlog file that cannot be read (a FIFO, a
// directory, a file of mode 000 in its place), each of the three files of
// T1, T2 and T3 in turn, makes the scan incomplete with the file named
// (its File has no end, which the report makes storectl.file.unreadable;
// rocketmq.timerlog.unknown gives its byte range), and nothing is
// concluded from positions inside it: no bad-prev-pos, wheel slot, gap or
// file name finding points into it, and every finding that is not about
// the unread file is one the scan of the intact store makes too. The
// prediction calls no message restored, lost or duplicated unless the
// intact store's says the same of it.
func TestUnreadTimerlogFile(t *testing.T) {
	for _, ds := range []struct {
		name, puts string
		later      time.Duration // started this long after the real restart
	}{
		{"t1-clean", "t1-clean", 0}, {"t2-kill", "t2-kill", 0}, {"t3-cltrunc", "t1-clean", 0},
		{"t1-clean", "t1-clean", 8 * 24 * time.Hour}, // past the wheel's 7 days: the TTL loses the pending messages
	} {
		now := time.UnixMilli(readRun(t, ds.name, ds.puts).begin.WallMs).Add(ds.later)
		intact := scanInTime(t, Config{Root: fixture(t, ds.name), RecoveryEnd: -1, Now: now})
		if intact.Incomplete {
			t.Fatalf("%s intact: incomplete %v", ds.name, intact.Errors)
		}
		inIntact := findingSet(t, intact)
		intactOut := outcomes(intact)
		for _, file := range []string{"00000000000000000000", "00000000000000004096", "00000000000000008192"} {
			for _, kind := range []string{"fifo", "dir", "mode000"} {
				name := ds.name
				if ds.later > 0 {
					name += "-8d"
				}
				t.Run(name+"/"+file+"/"+kind, func(t *testing.T) {
					rel := LogDir + "/" + file
					store := private(t, ds.name)
					unreadable(t, store, rel, kind)
					res := scanInTime(t, Config{Root: store, RecoveryEnd: -1, Now: now})
					sameJSON(t, "the timer scan begun beside the commitlog scan", res, scanOverlapped(t, store, Config{Now: now}))
					checkUnread(t, res, rel, 0, inIntact, intactOut)
				})
			}
		}
	}
}

// TestTimerlogCutShort: a timerlog file that comes short of the size it
// was listed with (cut while the scan runs) is read up to where the read
// fails; the rest of it is unread, as a file not read at all is, and what
// came before is judged as in the intact store. File 4096 of T1 is where
// recovery's walk begins; file 0 is before it.
func TestTimerlogCutShort(t *testing.T) {
	now := time.UnixMilli(1796163834084) // T1's restart
	cfg := Config{Root: fixture(t, "t1-clean"), RecoveryEnd: -1, Now: now}
	intact := scanInTime(t, cfg)
	for _, file := range []string{"00000000000000000000", "00000000000000004096"} {
		t.Run(file, func(t *testing.T) {
			const cut = 40 * 52 // 40 units are left
			rel := LogDir + "/" + file
			cfg := cfg
			cfg.Root = private(t, "t1-clean")
			ctx := context.Background()
			s := newScanner(cfg, scan.Options{})
			if err := s.openLog(ctx); err != nil {
				t.Fatal(err)
			}
			defer s.own.Close()
			steps := s.framesSteps() // checkpoint, metrics, listLog, the wheel, the walk
			steps = slices.Insert(steps, 3, func(context.Context) error {
				return os.Truncate(filepath.Join(cfg.Root, filepath.FromSlash(rel)), cut) // after the listing
			})
			if err := s.run(ctx, steps); err != nil {
				t.Fatal(err)
			}
			s.cqAhead()
			defer s.closeCQ()
			if err := s.run(ctx, s.targetSteps()); err != nil {
				t.Fatal(err)
			}
			s.finish()
			checkUnread(t, s.res, rel, cut, findingSet(t, intact), outcomes(intact))
		})
	}
}

// findingSet is the set of res's findings, as JSON.
func findingSet(t *testing.T, res *scan.Result) map[string]bool {
	m := map[string]bool{}
	for _, f := range res.Findings {
		m[findingKey(t, f)] = true
	}
	return m
}

// outcomes are res's predicted outcomes by message (uniq key and offset).
func outcomes(res *scan.Result) map[string]Outcome {
	m := map[string]Outcome{}
	for _, o := range res.Extra["timer"].(*Summary).Recovery.Messages {
		m[o.UniqKey+"@"+strconv.FormatInt(o.OffsetPy, 10)] = o
	}
	return m
}

func findingKey(t *testing.T, f scan.Finding) string {
	b, err := json.Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// checkUnread checks the scan res of a store whose timerlog file rel
// could not be read from file position from on, against the scan of the
// intact store (its findings, its outcomes by message).
func checkUnread(t *testing.T, res *scan.Result, rel string, from int64, inIntact map[string]bool, intactOut map[string]Outcome) {
	t.Helper()
	base, _ := strconv.ParseInt(strings.TrimPrefix(rel, LogDir+"/"), 10, 64)
	const size = 4096 // the fixtures' timerlog file size
	in := func(off int64) bool { return off >= base+from && off < base+size }

	if !res.Incomplete || !slices.ContainsFunc(res.Errors, func(e string) bool { return strings.HasPrefix(e, rel+": ") }) {
		t.Errorf("not incomplete with %s named: incomplete %v, errors %v", rel, res.Incomplete, res.Errors)
	}
	if !slices.ContainsFunc(res.Files, func(f scan.File) bool { return f.Path == rel && f.End == "" }) {
		t.Errorf("no file entry without an end (unreadable) for %s: %+v", rel, res.Files)
	}
	unknown := 0
	for _, f := range res.Findings {
		if f.Code == CodeLogUnknown {
			unknown++
			if f.Path != rel || f.Offset != from || f.Length != size-from || f.Details["timer_offset"] != base+from {
				t.Errorf("the unknown finding does not give %s's range: %+v", rel, f)
			}
		}
		switch f.Code {
		case CodeLogBadFileName, CodeLogBadFileSize, CodeLogOffsetGap:
			t.Errorf("%s: %s (%s)", f.Code, f.Path, f.Message)
		case CodeLogBadPrev:
			if p, err := strconv.ParseInt(f.Actual, 10, 64); err != nil || in(p) {
				t.Errorf("bad-prev-pos into the unread file: %+v", f)
			}
		case CodeWheelBadUnit, CodeWheelPastLog:
			if p, err := strconv.ParseInt(f.Actual, 10, 64); err != nil || in(p) {
				t.Errorf("%s into the unread file: %+v", f.Code, f)
			}
		}
		if !aboutUnread(f, rel) && !inIntact[findingKey(t, f)] {
			t.Errorf("a finding the intact store does not have: %s %s@%d %s (%v)", f.Code, f.Path, f.Offset, f.Message, f.Details)
		}
	}
	if unknown != 1 {
		t.Errorf("%d %s findings, want 1", unknown, CodeLogUnknown)
	}
	sum := res.Extra["timer"].(*Summary)
	if len(sum.Unread) != 1 || sum.Unread[0].Path != rel || sum.Unread[0].Offset != from || sum.Unread[0].Length != size-from {
		t.Errorf("summary unread %+v", sum.Unread)
	}
	rc := sum.Recovery
	for _, o := range rc.Messages {
		if o.Outcome == OutcomeUnknown {
			continue
		}
		if want, ok := intactOut[o.UniqKey+"@"+strconv.FormatInt(o.OffsetPy, 10)]; !ok || want.Outcome != o.Outcome {
			t.Errorf("message %s at %d: %s, the intact store's prediction %q", o.UniqKey, o.OffsetPy, o.Outcome, want.Outcome)
		}
	}
	t.Logf("recovery unknown %v (waits on %v), process offset %d, restore %d, lost %d, duplicates %d, unknown messages %d on %d slots",
		rc.Unknown, rc.WaitsOn, rc.ProcessOffset, rc.Restore, rc.Lost, rc.Duplicates, rc.UnknownMsgs, rc.UnknownSlots)
}
