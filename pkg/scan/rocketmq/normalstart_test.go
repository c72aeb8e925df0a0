package rocketmq

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/storectl/storectl/internal/testutil"
	rmq "github.com/storectl/storectl/pkg/format/rocketmq"
	"github.com/storectl/storectl/pkg/scan"
)

// brokerNormalStart reads, from the real broker's recover log of a clean
// shutdown, the file recoverNormally started at (the one before its
// first "recover next physics file" line, else the file its walk ended
// in) and the maxPhyOffsetOfConsumeQueue it logged.
func brokerNormalStart(t *testing.T, log string) (start int64, cqMax int64) {
	t.Helper()
	b, err := os.ReadFile(testutil.Testdata("rocketmq", log))
	if err != nil {
		t.Fatal(err)
	}
	if m := regexp.MustCompile(`recover next physics file, \S*/commitlog/(\d{20})`).FindSubmatch(b); m != nil {
		next, _ := strconv.ParseInt(string(m[1]), 10, 64)
		start = next - 262144
	} else if m := regexp.MustCompile(`recover physics file end, \S*/commitlog/(\d{20})`).FindSubmatch(b); m != nil {
		start, _ = strconv.ParseInt(string(m[1]), 10, 64)
	} else {
		t.Fatalf("%s: no recovery walk lines", log)
	}
	m := regexp.MustCompile(`maxPhyOffsetOfConsumeQueue\((\d+)\)`).FindSubmatch(b)
	if m == nil {
		t.Fatalf("%s: no maxPhyOffsetOfConsumeQueue", log)
	}
	cqMax, _ = strconv.ParseInt(string(m[1]), 10, 64)
	return start, cqMax
}

// midRecord is a record boundary in the middle of commitlog file base
// (from the broker's decode oracle).
func midRecord(t *testing.T, ds string, base int64) int64 {
	t.Helper()
	var in []int64
	for _, m := range readOracle(t, ds+".decode.jsonl").msgs {
		if m.PhyOffset >= base && m.PhyOffset < base+262144 {
			in = append(in, m.PhyOffset-base)
		}
	}
	if len(in) < 2 {
		t.Fatalf("oracle: no records in file %d", base)
	}
	return in[len(in)/2]
}

// TestNormalRecoveryStartAfterEarlyStop: after a clean shutdown (no abort
// file) the broker's recoverNormally starts at the third file from the
// last in 4.9.7 and, in 5.3.3, at the last file whose base is at or
// before the consume queues' max offset; it never reads or truncates the
// files before it. Zeroing a file before that start from a record
// boundary must leave the recovery end where the real broker recovered
// the undamaged store (its start file read from its log, whose first
// records the damage does not touch), with the damage a warning naming
// the start file and no beyond-recovery-end. Each case zeroes a file
// before both rules' starts (4.9.7: file 0; 4.x gives file 1, 5.x file 3,
// so the version need not be known) or before the known 5.x start (5.3.3
// stores carry abort.bak and compaction/: files 1 and 2). A walk from
// file 0 (the old scan) stopped in the damaged file.
func TestNormalRecoveryStartAfterEarlyStop(t *testing.T) {
	for _, c := range []struct {
		ds   string
		base int64 // the file zeroed from mid-file
	}{
		{"rmq497-a-clean", 0},
		{"rmq533-a-clean", 262144},
		{"rmq533-a-clean", 524288},
		{"rmq533-e-propcrc-clean", 262144},
	} {
		t.Run(fmt.Sprintf("%s/%d", c.ds, c.base), func(t *testing.T) {
			t.Parallel()
			start, cqMax := brokerNormalStart(t, c.ds+".recover.log")
			if start <= c.base {
				t.Fatalf("oracle: the broker started at %d, not after the damaged file %d", start, c.base)
			}
			want := recoverMax(t, c.ds+".recover.jsonl")
			cut := midRecord(t, c.ds, c.base)
			root, vres := verifyDataset(t, c.ds, func(root string) { zeroFrom(t, root, c.base, cut) })
			if _, err := os.Stat(filepath.Join(root, "abort")); err == nil {
				t.Fatal("oracle: not a clean shutdown")
			}
			if got, _, err := cqMaxPhy(root); err != nil || got != cqMax {
				t.Errorf("cqMaxPhy = %d, %v; broker logged %d", got, err, cqMax)
			}
			res := scanRoot(t, root, 2)
			sameStart(t, c.ds, root, res, vres)
			for name, r := range map[string]*scan.Result{"scan": res, "verify": vres} {
				if r.RecoveryEnd == nil || *r.RecoveryEnd != want {
					t.Errorf("%s: RecoveryEnd = %s (extra %v), broker (start %d) recovers to %d", name, fmtEnd(r.RecoveryEnd), r.Extra, start, want)
				}
				early := 0
				for _, f := range r.Findings {
					switch f.Code {
					case CodeBeyondRecovery, CodeCQBeyondEnd, CodeCommitLogUnknown:
						t.Errorf("%s: %+v: the broker keeps the later files", name, f)
					case CodeEarlyEnd:
						early++
						if f.Path != "commitlog/"+rmq.FormatFileName(c.base) || f.Offset != cut || f.Repair != scan.RepairNone || f.Severity != scan.Warning {
							t.Errorf("%s: early end %+v", name, f)
						}
					}
				}
				if early != 1 {
					t.Errorf("%s: %d early-end findings, want the one in the damaged file", name, early)
				}
			}
			if c.ds != "rmq497-a-clean" { // 5.x: the start is known
				if got := res.Layout["recovery_start_file"]; got != rmq.FormatFileName(start) {
					t.Errorf("scan: recovery_start_file = %v, broker %s", got, rmq.FormatFileName(start))
				}
			}
		})
	}
}

// TestNormalRecoveryStartUnknownVersion: on the 4.9.7 clean store zeroed
// from mid file 1, 4.9.7's recoverNormally (start file 1, as its log
// shows) stops there, while 5.3.3's (the consume queues' max 1035569 is
// in file 3) would keep everything. No 5.x trace is present and none
// proves 4.x, so the scan must not pick one: the recovery end is unknown
// (at least the stop in file 1, waiting on the version), the later files
// are unknown rather than beyond the end. With an abort.bak (a 5.x trace)
// the 5.x rule holds and the end is the full 1035569 (the store's clean
// recovery max). The old scan gave a known end in file 1.
func TestNormalRecoveryStartUnknownVersion(t *testing.T) {
	const ds, base1 = "rmq497-a-clean", 262144
	start, cqMax := brokerNormalStart(t, ds+".recover.log")
	if start != base1 {
		t.Fatalf("oracle: 4.9.7 started at %d", start)
	}
	cut := midRecord(t, ds, base1)
	root, vres := verifyDataset(t, ds, func(root string) { zeroFrom(t, root, base1, cut) })
	res := scanRoot(t, root, 2)
	for name, r := range map[string]*scan.Result{"scan": res, "verify": vres} {
		if r.RecoveryEnd != nil {
			t.Errorf("%s: RecoveryEnd = %d, want unknown", name, *r.RecoveryEnd)
		}
		u, _ := r.Extra[ExtraRecoveryEndUnknown].(map[string]any)
		if at, _ := u["at_least"].(int64); at != base1+cut {
			t.Errorf("%s: recovery_end_unknown = %v, want at_least %d", name, u, base1+cut)
		}
	}
	u := res.Extra[ExtraRecoveryEndUnknown].(map[string]any)
	if u["missing"] == nil {
		t.Errorf("scan: no missing assumption in %v", u)
	}
	// Verify words what waits on the version as the assumption it is,
	// not as a file it could not read.
	said := 0
	for _, f := range vres.Findings {
		switch f.Code {
		case CodeRecoveryPlan, CodeCQUnknown, CodeIndexUnknown:
			said++
			if strings.Contains(f.Message, "could not be read") || !strings.Contains(f.Message, fmt.Sprint(u["missing"])) {
				t.Errorf("verify %s: %q: want the missing assumption %q, not a file not read", f.Code, f.Message, u["missing"])
			}
		}
	}
	if said < 2 {
		t.Errorf("verify: %d plan/unknown findings say what the end waits on, want the plan and the queues' or index's", said)
	}
	unknown := 0
	for _, f := range res.Findings {
		switch f.Code {
		case CodeBeyondRecovery:
			t.Errorf("%+v: which recovery runs is unknown", f)
		case CodeCommitLogUnknown:
			unknown++
		case CodeEarlyEnd:
			if f.Repair != scan.RepairNone {
				t.Errorf("early end %+v: a truncate is not known to be right", f)
			}
		}
	}
	if unknown != 2 {
		t.Errorf("%d unknown files, want files 2 and 3", unknown)
	}

	if err := os.WriteFile(filepath.Join(root, "abort.bak"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	res = scanRoot(t, root, 2)
	if sameStart(t, "with abort.bak", root, res, verifyRoot(t, root, VerifyConfig{Config: Config{Root: root}})) == "" {
		t.Errorf("with abort.bak: the scan did not decide the start")
	}
	if res.RecoveryEnd == nil || *res.RecoveryEnd != recoverMax(t, ds+".recover.jsonl") {
		t.Errorf("with abort.bak: RecoveryEnd = %s, want %d (5.x start at the file holding %d)", fmtEnd(res.RecoveryEnd), recoverMax(t, ds+".recover.jsonl"), cqMax)
	}
	if got := res.Layout["recovery_start_file"]; got != rmq.FormatFileName(786432) {
		t.Errorf("with abort.bak: recovery_start_file = %v", got)
	}
}

func fmtEnd(p *int64) string {
	if p == nil {
		return "unknown"
	}
	return strconv.FormatInt(*p, 10)
}

// TestNormalRecoveryStartCQUnread: 5.3.3's recoverNormally starts at the
// last file whose base is at or before the consume queues' max offset,
// so with a file before that start damaged the recovery end rests on
// every queue's last units. With the file holding the unit the broker's
// max came from a directory, cqMaxPhy skipped it (a lower max, an earlier
// start, a known end in the damaged file); now the max, the start and the
// end are unknown, waiting on that file.
func TestNormalRecoveryStartCQUnread(t *testing.T) {
	const ds, base = "rmq533-a-clean", 262144
	_, cqMax := brokerNormalStart(t, ds+".recover.log")
	cut := midRecord(t, ds, base)
	var maxFile string
	root := filepath.Join(testutil.Untar(t, testutil.Testdata("rocketmq", ds+".tar.gz")), "store")
	func() {
		zeroFrom(t, root, base, cut)
		_ = filepath.Walk(filepath.Join(root, "consumequeue"), func(p string, info os.FileInfo, err error) error {
			if err != nil || !info.Mode().IsRegular() {
				return err
			}
			b, _ := os.ReadFile(p)
			for i := 0; i+rmq.CQUnitSize <= len(b); i += rmq.CQUnitSize {
				u, _ := rmq.DecodeCQUnit(b[i:], int64(i))
				if u.Valid() && u.CommitLogOffset+int64(u.Size) == cqMax {
					maxFile = p
				}
			}
			return nil
		})
		if maxFile == "" {
			t.Fatalf("oracle: no unit ends at the broker's max %d", cqMax)
		}
		if err := os.Remove(maxFile); err != nil {
			t.Fatal(err)
		}
		if err := os.Mkdir(maxFile, 0o755); err != nil {
			t.Fatal(err)
		}
	}()
	rel, _ := filepath.Rel(root, maxFile)
	rel = filepath.ToSlash(rel)
	if _, waits, err := cqMaxPhy(root); err == nil || waits != rel {
		t.Fatalf("cqMaxPhy: waits %q, %v; want %s, not a regular file", waits, err, rel)
	}
	res := scanRoot(t, root, 2)
	if res.RecoveryEnd != nil {
		t.Fatalf("RecoveryEnd = %d: the start rests on %s, which could not be read", *res.RecoveryEnd, rel)
	}
	if u, _ := res.Extra[ExtraRecoveryEndUnknown].(map[string]any); u["waits_on"] != rel {
		t.Fatalf("recovery_end_unknown = %v, want waits_on %s", u, rel)
	}
	vres, err := Verify(context.Background(), VerifyConfig{Config: Config{Root: root}}, scan.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if vres.RecoveryEnd != nil || !vres.Incomplete {
		t.Fatalf("verify: RecoveryEnd %s, incomplete %v", fmtEnd(vres.RecoveryEnd), vres.Incomplete)
	}
}
