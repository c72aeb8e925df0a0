package timer

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/storectl/storectl/internal/testutil"
	"github.com/storectl/storectl/pkg/scan"
)

func TestMain(m *testing.M) {
	code := m.Run()
	testutil.RemoveShared()
	os.Exit(code)
}

// fixture unpacks a dataset once per test binary (read-only users)
// and returns its store dir.
func fixture(t testing.TB, ds string) string {
	t.Helper()
	return filepath.Join(testutil.SharedUntar(t, testutil.Testdata("rocketmq-5x", "rmq533-"+ds+".tar.gz")), "store")
}

// private unpacks a dataset into a fresh dir the test may change.
func private(t testing.TB, ds string) string {
	t.Helper()
	return filepath.Join(testutil.Untar(t, testutil.Testdata("rocketmq-5x", "rmq533-"+ds+".tar.gz")), "store")
}

var failRe = regexp.MustCompile(`Fail to read msg from commitLog offsetPy:([0-9]+)`)

type trunLine struct {
	Kind                 string `json:"kind"`
	WallMs               int64  `json:"wall_ms"`
	TimerCurrQueueOffset int64  `json:"timer_curr_queue_offset"`
	TimerCurrReadTimeMs  int64  `json:"timer_curr_read_time_ms"`
	TimerlogFlushedWhere int64  `json:"timerlog_flushed_where"`
	TimerCQMin           int64  `json:"timer_cq_min"`
	TimerCQMax           int64  `json:"timer_cq_max"`
	MaxPhyOffset         int64  `json:"max_phy_offset"`
	Tseq                 string `json:"tseq"`
}

type putLine struct {
	PutSeq    *int64 `json:"put_seq"`
	Tseq      *int64 `json:"tseq"`
	PhyOffset int64  `json:"phy_offset"`
	DelaySec  int64  `json:"delay_sec"`
}

// oracleRun is what the real restart did: the TMS state after load and,
// per tseq, deliveries before the stop and in the 60 s after the restart.
type oracleRun struct {
	begin, load   trunLine
	before, after map[int64]int
	tseqAt        map[int64]int64 // timer record phy offset -> tseq
}

func readRun(t *testing.T, ds, putsDS string) oracleRun {
	o := oracleRun{before: map[int64]int{}, after: map[int64]int{}, tseqAt: map[int64]int64{}}
	for _, l := range testutil.ReadJSONL[trunLine](t, testutil.Testdata("rocketmq-5x", "rmq533-"+ds+".trun.jsonl")) {
		switch l.Kind {
		case "trun_begin":
			o.begin = l
		case "load_result":
			o.load = l
		case "timer_reput":
			n, _ := strconv.ParseInt(l.Tseq, 10, 64)
			o.after[n]++
		}
	}
	for _, l := range testutil.ReadJSONL[trunLine](t, testutil.Testdata("rocketmq-5x", "rmq533-"+putsDS+".write-reputs.jsonl")) {
		n, _ := strconv.ParseInt(l.Tseq, 10, 64)
		o.before[n]++
	}
	for _, p := range testutil.ReadJSONL[putLine](t, testutil.Testdata("rocketmq-5x", "rmq533-"+putsDS+".puts.jsonl")) {
		if p.Tseq != nil {
			o.tseqAt[p.PhyOffset] = *p.Tseq
		}
	}
	return o
}

func scanDS(t *testing.T, store string, nowMs int64) (*scan.Result, *Summary) {
	t.Helper()
	res, err := Scan(context.Background(), Config{Root: store, RecoveryEnd: -1, Now: time.UnixMilli(nowMs)}, scan.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Incomplete {
		t.Fatalf("incomplete: %v", res.Errors)
	}
	return res, res.Extra["timer"].(*Summary)
}

// TestOracleRecovery: for T1-T3 the predicted timer recovery equals what
// the real 5.3.3 TimerMessageStore did at its restart: the state after
// load (timerlog process offset, queue offset, read time, timer CQ range,
// the commitlog's max offset), and per message the deliveries before the
// stop and after the restart (restored, lost, delivered twice).
func TestOracleRecovery(t *testing.T) {
	cases := []struct {
		ds, puts                          string
		restore, lost, dupMsgs, roll, dup int
	}{
		{"t1-clean", "t1-clean", 168, 0, 0, 2, 0},
		{"t2-kill", "t2-kill", -1, 0, 42, 2, 42},
		{"t3-cltrunc", "t1-clean", 99 - 1, 69, 1, 2, 1},
	}
	for _, c := range cases {
		t.Run(c.ds, func(t *testing.T) {
			o := readRun(t, c.ds, c.puts)
			res, sum := scanDS(t, fixture(t, c.ds), o.begin.WallMs)
			rc := sum.Recovery
			for _, chk := range []struct {
				name      string
				got, want int64
			}{
				{"commitlog max offset", sum.CommitLogEnd, o.load.MaxPhyOffset},
				{"timerlog process offset", rc.ProcessOffset, o.load.TimerlogFlushedWhere},
				{"timer curr queue offset", rc.CurrQueueOffset, o.load.TimerCurrQueueOffset},
				{"timer curr read time", rc.CurrReadTimeMs, o.load.TimerCurrReadTimeMs},
				{"timer CQ min", rc.TimerCQMin, o.load.TimerCQMin},
				{"timer CQ max", rc.TimerCQMax, o.load.TimerCQMax},
			} {
				if chk.got != chk.want {
					t.Errorf("%s: predicted %d, the real recovery %d", chk.name, chk.got, chk.want)
				}
			}
			// Per message.
			diffs, seen := 0, map[int64]bool{}
			for _, m := range rc.Messages {
				ts, ok := o.tseqAt[m.OffsetPy]
				if !ok {
					t.Errorf("message at %d is not a put of the dataset", m.OffsetPy)
					diffs++
					continue
				}
				seen[ts] = true
				wantAfter := o.after[ts]
				if m.Outcome == OutcomeRoll {
					wantAfter = 0 // due in 2.5 days, after the 60 s run
				}
				if m.After != wantAfter || m.Before != o.before[ts] && m.Outcome != OutcomeRoll {
					diffs++
					t.Errorf("tseq %d: predicted before %d after %d (%s), real before %d after %d", ts, m.Before, m.After, m.Outcome, o.before[ts], o.after[ts])
				}
			}
			for ts, n := range o.after {
				if !seen[ts] {
					diffs++
					t.Errorf("tseq %d delivered %d times after the restart, not predicted", ts, n)
				}
			}
			t.Logf("%s: %d messages predicted (restore %d, already delivered %d, lost %d, duplicate messages %d / extra deliveries %d, pending roll %d, failed reads %d), %d differences from the real run",
				c.ds, len(rc.Messages), rc.Restore, rc.Delivered, rc.Lost, rc.DupMessages, rc.Duplicates, rc.PendingRoll, rc.FailedReads, diffs)
			if c.restore >= 0 && rc.Restore != c.restore || rc.Lost != c.lost || rc.DupMessages != c.dupMsgs || rc.PendingRoll != c.roll || rc.Duplicates != c.dup {
				t.Errorf("counts: restore %d lost %d dup messages %d roll %d dup %d; want %d %d %d %d %d", rc.Restore, rc.Lost, rc.DupMessages,
					rc.PendingRoll, rc.Duplicates, c.restore, c.lost, c.dupMsgs, c.roll, c.dup)
			}
			// Every unit the prediction says the dequeue fails to read is one
			// offset of the real run's "Fail to read msg" warnings.
			logb, err := os.ReadFile(testutil.Testdata("rocketmq-5x", "rmq533-"+c.ds+".trun.log"))
			if err != nil {
				t.Fatal(err)
			}
			failed := map[string]bool{}
			for _, m := range failRe.FindAllSubmatch(logb, -1) {
				failed[string(m[1])] = true
			}
			if rc.FailedReads != len(failed) {
				t.Errorf("predicted %d units the dequeue fails to read, the real run logged %d offsets", rc.FailedReads, len(failed))
			}
			_, byCode := res.Counts()
			t.Logf("findings: %v", byCode)
		})
	}
}

type unitLine struct {
	Kind     string `json:"kind"`
	File     string `json:"file"`
	Pos      int64  `json:"pos"`
	OffsetPy int64  `json:"offset_py"`
}

// readUnits returns the real code's timer_unit lines of a dataset.
func readUnits(t *testing.T, ds string) []unitLine {
	var out []unitLine
	for _, l := range testutil.ReadJSONL[unitLine](t, testutil.Testdata("rocketmq-5x", "rmq533-"+ds+".tdecode.jsonl")) {
		if l.Kind == "timer_unit" {
			out = append(out, l)
		}
	}
	return out
}
