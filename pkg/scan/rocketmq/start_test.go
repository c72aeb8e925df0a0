package rocketmq

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/storectl/storectl/internal/testutil"
	rmq "github.com/storectl/storectl/pkg/format/rocketmq"
	"github.com/storectl/storectl/pkg/scan"
)

// brokerStartFile is the file the real broker's recoverAbnormally
// started from, from its log line "recover from this mapped file ...".
func brokerStartFile(t *testing.T, log string) string {
	t.Helper()
	b, err := os.ReadFile(testutil.Testdata("rocketmq", log))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`recover from this mapped file \S*/commitlog/(\d{20})`).FindSubmatch(b)
	if m == nil {
		t.Fatalf("%s: no start file line", log)
	}
	return "commitlog/" + string(m[1])
}

// zeroFrom zeroes commitlog file base from pos to its end: a file that
// ends in zeros without a BLANK record while later files hold data.
func zeroFrom(t *testing.T, root string, base, pos int64) {
	t.Helper()
	p := filepath.Join(root, "commitlog", rmq.FormatFileName(base))
	f, err := os.OpenFile(p, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, _ := f.Stat()
	if _, err := f.WriteAt(make([]byte, st.Size()-pos), pos); err != nil {
		t.Fatal(err)
	}
}

// TestRecoveryStartAfterEarlyStop: after an unclean shutdown the broker
// (CommitLog.recoverAbnormally, 4.9.7 and 5.3.3) starts at the last file
// whose first record is not newer than the checkpoint's min timestamp and
// walks on from there; the files before it are never read, and
// MappedFileQueue.truncateDirtyFiles(processOffset) only touches files
// whose end lies past processOffset. So zeroing the tail of file 1 (a
// walk from file 0 would stop there, and call files 2 and 3 beyond the
// recovery end) changes nothing for a start at file 3: the recovery end
// is the one the real broker recovered on the undamaged store (its start
// file, from its log, is file 3 and its first record is untouched). With
// a zero checkpoint nothing matches, recovery starts at file 0, and then
// it does stop in file 1.
func TestRecoveryStartAfterEarlyStop(t *testing.T) {
	for _, c := range []struct{ ds, recovered, log string }{
		{"rmq533-b-abnormal", "rmq533-b-abnormal.recover.jsonl", "rmq533-b-abnormal.recover.log"},
		{"rmq497-c-stale", "rmq497-c-stale.fixed-recovery.recover.jsonl", "rmq497-c-stale.fixed-recovery.recover.log"},
	} {
		t.Run(c.ds, func(t *testing.T) {
			t.Parallel()
			start := brokerStartFile(t, c.log)
			if start == "commitlog/"+rmq.FormatFileName(0) {
				t.Fatalf("oracle: the broker started at file 0")
			}
			want := recoverMax(t, c.recovered)
			const base1 = 262144
			var cut int64 = -1 // a record boundary in the middle of file 1
			msgs := readOracle(t, c.ds+".decode.jsonl").msgs
			var in1 []int64
			for _, m := range msgs {
				if m.PhyOffset >= base1 && m.PhyOffset < 2*base1 {
					in1 = append(in1, m.PhyOffset-base1)
				}
			}
			if len(in1) < 2 {
				t.Fatal("oracle: no records in file 1")
			}
			cut = in1[len(in1)/2]
			damaged := func(root string) { zeroFrom(t, root, base1, cut) }

			root, vres := verifyDataset(t, c.ds, damaged)
			res := scanRoot(t, root, 2)
			sameStart(t, c.ds+" damaged", root, res, vres)
			for name, r := range map[string]*scan.Result{"scan": res, "verify": vres} {
				if r.RecoveryEnd == nil || *r.RecoveryEnd != want {
					t.Errorf("%s: RecoveryEnd = %v, broker (start %s) recovers to %d", name, r.RecoveryEnd, start, want)
				}
				if "commitlog/"+fmt.Sprint(r.Layout["recovery_start_file"]) != start {
					t.Errorf("%s: recovery_start_file = %v, broker %s", name, r.Layout["recovery_start_file"], start)
				}
				early := 0
				for _, f := range r.Findings {
					switch f.Code {
					case CodeBeyondRecovery, CodeCQBeyondEnd:
						t.Errorf("%s: %+v: the broker keeps files 2 and 3", name, f)
					case CodeEarlyEnd:
						early++
						if f.Path != "commitlog/"+rmq.FormatFileName(base1) || f.Offset != cut || f.Repair != scan.RepairNone || f.Severity != scan.Warning {
							t.Errorf("%s: early end %+v", name, f)
						}
					}
				}
				if early != 1 {
					t.Errorf("%s: %d early-end findings, want the one in file 1", name, early)
				}
			}

			// A zero checkpoint: isMappedFileMatchedRecover matches no
			// file (store time <= 0 fails), index < 0 gives file 0, and
			// the walk from it stops at the zeros in file 1.
			if err := os.WriteFile(filepath.Join(root, "checkpoint"), make([]byte, 4096), 0o644); err != nil {
				t.Fatal(err)
			}
			res = scanRoot(t, root, 2)
			if sameStart(t, c.ds+" zero checkpoint", root, res, verifyRoot(t, root, VerifyConfig{Config: Config{Root: root}})) != rmq.FormatFileName(0) {
				t.Errorf("zero checkpoint: the scan did not decide file 0")
			}
			if res.RecoveryEnd == nil || *res.RecoveryEnd != base1+cut {
				t.Errorf("zero checkpoint: RecoveryEnd = %v, want %d (start file 0)", res.RecoveryEnd, base1+cut)
			}
			if _, ok := res.Layout["recovery_start_file"]; ok {
				t.Errorf("zero checkpoint: recovery_start_file = %v, want none (file 0)", res.Layout["recovery_start_file"])
			}
			beyond := 0
			for _, f := range res.Findings {
				if f.Code == CodeBeyondRecovery {
					beyond++
				}
				if f.Code == CodeEarlyEnd && (f.Severity != scan.Error || f.Repair != scan.RepairTruncate) {
					t.Errorf("zero checkpoint: early end %+v", f)
				}
			}
			if beyond != 2 {
				t.Errorf("zero checkpoint: %d beyond-recovery files, want 2 and 3", beyond)
			}
		})
	}
}
