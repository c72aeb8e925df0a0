package rocketmq

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/storectl/storectl/internal/testutil"
	rmq "github.com/storectl/storectl/pkg/format/rocketmq"
	"github.com/storectl/storectl/pkg/scan"
)

// scanStartFile is the recovery start file the scan of root decided, from
// its layout: recovery_start_file, or, after an unclean shutdown of a
// data dir with two commitlog files or more (recoveryStart always
// decides then and names only a start past file 0), the first file. ""
// when the scan did not decide (a clean shutdown whose walk no file
// before the last stops, or whose version is not known).
func scanStartFile(t *testing.T, root string, sres *scan.Result) string {
	t.Helper()
	if f, ok := sres.Layout["recovery_start_file"]; ok {
		return f.(string)
	}
	if _, err := os.Stat(filepath.Join(root, "abort")); err != nil || len(sres.Files) < 2 {
		return ""
	}
	return strings.TrimPrefix(sres.Files[0].Path, "commitlog/")
}

// sameStart checks that verify says the recovery starts where the scan
// of the same store does: its layout recovery_start_file, and the
// start_file of the recovery plan (clean shutdown) or unclean-shutdown
// finding and of recovery-skips. It returns the scan's start ("" when
// the scan did not decide; then nothing is compared).
func sameStart(t *testing.T, name, root string, sres, vres *scan.Result) string {
	t.Helper()
	want := scanStartFile(t, root, sres)
	if want == "" {
		return ""
	}
	if got := vres.Layout["recovery_start_file"]; got != want {
		t.Errorf("%s: verify recovery_start_file = %v, the scan's %s", name, got, want)
	}
	plans := 0
	for _, f := range vres.Findings {
		switch f.Code {
		case CodeRecoveryPlan, CodeUncleanShutdown, CodeRecoverySkips:
			if f.Code != CodeRecoverySkips {
				plans++
			}
			if got := f.Details["start_file"]; got != want {
				t.Errorf("%s: %s start_file = %v, the scan's %s (%s)", name, f.Code, got, want, f.Message)
			}
			if !strings.Contains(f.Message, want) {
				t.Errorf("%s: %s does not name the scan's start %s: %s", name, f.Code, want, f.Message)
			}
		}
	}
	if plans != 1 {
		t.Errorf("%s: %d recovery plan findings, want 1", name, plans)
	}
	return want
}

// TestVerifyStartIsScanStart: on every RocketMQ fixture (file stores of
// testdata/rocketmq and testdata/rocketmq-5x) verify says the recovery
// starts where the scan decided it does.
func TestVerifyStartIsScanStart(t *testing.T) {
	var tars []string
	for _, dir := range []string{"rocketmq", "rocketmq-5x"} {
		m, err := filepath.Glob(testutil.Testdata(dir, "*.tar.gz"))
		if err != nil || len(m) == 0 {
			t.Fatalf("%s: no fixtures (%v)", dir, err)
		}
		tars = append(tars, m...)
	}
	decided := 0
	for _, tar := range tars {
		root := filepath.Join(testutil.Untar(t, tar), "store")
		if _, err := os.Stat(filepath.Join(root, "commitlog")); err != nil {
			continue // DLedger: another scan
		}
		name := filepath.Base(tar)
		if f := sameStart(t, name, root, scanRoot(t, root, 2), verifyRoot(t, root, VerifyConfig{Config: Config{Root: root}})); f != "" {
			t.Logf("%s: start %s", name, f)
			decided++
		}
	}
	if decided == 0 {
		t.Fatal("no fixture where the scan decides the start: nothing compared")
	}
}

// TestVerifyStartRawFirstRecord: isMappedFileMatchedRecover reads the
// magic and store timestamp at offset 0 of a file with no CRC check, so a
// body CRC broken in the first record of the file the real broker
// started at (rmq533-b-abnormal: file 3, from its log) leaves the start
// there (the walk then stops at once: the recovery end is that file's
// base). Verify's old rule took each file's first valid record and so
// skipped file 3 and started earlier.
func TestVerifyStartRawFirstRecord(t *testing.T) {
	const ds = "rmq533-b-abnormal"
	start := brokerStartFile(t, ds+".recover.log")
	base := int64(3 * 262144)
	if start != "commitlog/"+rmq.FormatFileName(base) {
		t.Fatalf("oracle: the broker started at %s", start)
	}
	root, vres := verifyDataset(t, ds, func(root string) {
		patch(t, root, base, func(b []byte, pos int64) []byte {
			b[pos+8] ^= 0xff // BODYCRC; magic and store time stay
			return b
		})
	})
	startsAtBadFirstRecord(t, ds, root, vres, base)
}

// TestVerifyNormalStartRawFirstRecord: after a clean shutdown the 5.3.3
// broker's recoverNormally starts at the last file whose base is at or
// before the consume queues' max offset (rmq533-a-clean: file 3, from its
// log), whatever that file's first record holds. With file 1 zeroed from
// mid-file (so the start matters) and file 3's first record's body CRC
// broken, the scan starts at file 3 and stops at once; verify's old rule
// (the last file whose first valid record's offset is <= the dispatch
// offset) skipped file 3 and named file 2.
func TestVerifyNormalStartRawFirstRecord(t *testing.T) {
	const ds, base1 = "rmq533-a-clean", 262144
	start, _ := brokerNormalStart(t, ds+".recover.log")
	base := int64(3 * 262144)
	if start != base {
		t.Fatalf("oracle: the broker started at %d", start)
	}
	cut := midRecord(t, ds, base1)
	root, vres := verifyDataset(t, ds, func(root string) {
		zeroFrom(t, root, base1, cut)
		patch(t, root, base, func(b []byte, pos int64) []byte {
			b[pos+8] ^= 0xff // BODYCRC; magic and store time stay
			return b
		})
	})
	startsAtBadFirstRecord(t, ds, root, vres, base)
}

// startsAtBadFirstRecord checks that the scan of root and verify's vres
// start at the file at base, as the broker does, and that both end there
// (its first record fails its CRC).
func startsAtBadFirstRecord(t *testing.T, ds, root string, vres *scan.Result, base int64) {
	t.Helper()
	sres := scanRoot(t, root, 2)
	if got := sameStart(t, ds, root, sres, vres); got != rmq.FormatFileName(base) {
		t.Errorf("scan start = %q, broker %s", got, rmq.FormatFileName(base))
	}
	for name, r := range map[string]*scan.Result{"scan": sres, "verify": vres} {
		if r.RecoveryEnd == nil || *r.RecoveryEnd != base {
			t.Errorf("%s: RecoveryEnd = %s, want %d (the first record of the start file fails its CRC)", name, fmtEnd(r.RecoveryEnd), base)
		}
	}
}
