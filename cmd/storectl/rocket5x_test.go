package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/storectl/storectl/internal/testutil"
	"github.com/storectl/storectl/pkg/scan"
)

func untar5x(t *testing.T, ds string) string {
	t.Helper()
	return filepath.Join(testutil.Untar(t, testutil.Testdata("rocketmq-5x", "rmq533-"+ds+".tar.gz")), "store")
}

// findingCodes counts a JSONL report's findings by code, and returns the
// summary's exit code.
func findingCodes(t *testing.T, out string) (map[string]int, []map[string]any) {
	t.Helper()
	codes := map[string]int{}
	var fs []map[string]any
	for _, o := range jsonlObjects(t, out) {
		if o["type"] == "finding" {
			codes[o["code"].(string)]++
			fs = append(fs, o)
		}
	}
	return codes, fs
}

// TestRocksDBConsumeQueueDir: a store whose consumequeue/ holds a RocksDB
// database (the file names storeType=defaultRocksDB leaves there) is
// detected, listed as the RocksDB component, and never read as file
// queues: no consume queue unit, missing unit or topic dir finding.
func TestRocksDBConsumeQueueDir(t *testing.T) {
	store := untar5x(t, "t1-clean")
	cq := filepath.Join(store, "consumequeue")
	if err := os.RemoveAll(cq); err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"CURRENT": "MANIFEST-000005\n", "IDENTITY": "0b6e6f1c-rocksdb\n", "LOCK": "", "LOG": "RocksDB version: 8.10.0\n",
		"MANIFEST-000005": "\x00\x01garbage-manifest", "000009.sst": "not a table \xff\xfe", "000004.log": "wal \x00\x01",
		"OPTIONS-000007": "# This is a RocksDB option file.\n[Version]\n  rocksdb_version=8.10.0\n  options_file_version=1.1\n[CFOptions \"default\"]\n[CFOptions \"offset\"]\n",
	}
	if err := os.MkdirAll(cq, 0o755); err != nil {
		t.Fatal(err)
	}
	for n, c := range files {
		if err := os.WriteFile(filepath.Join(cq, n), []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	code, out, errOut := runCLI(t, "verify", "-o", "jsonl", "--timer-now", "1796163834084", store)
	codes, _ := findingCodes(t, out)
	for c := range codes {
		switch c {
		case "rocketmq.consumequeue.missing", "rocketmq.consumequeue.bad-unit", "rocketmq.consumequeue.bad-file-name", "rocketmq.topics.no-queue-dir":
			t.Errorf("RocksDB files read as file queues: %s", c)
		}
	}
	if codes["rocketmq.consumequeue.not-checked"] != 1 || codes["rocketmq.consumequeue.rocksdb"] != 1 {
		t.Errorf("RocksDB consume queue not reported: %v", codes)
	}
	run := jsonlObjects(t, out)[0]
	found := false
	for _, x := range run["components"].([]any) {
		m := x.(map[string]any)
		if m["name"] == scan.RocketRocksDBCQ {
			found = m["checked"] == true && m["files"].(float64) == float64(len(files))
		}
	}
	if !found || code != exitOK {
		t.Fatalf("exit %d, RocksDB component listed and checked: %v\n%s\n%s", code, found, out, errOut)
	}
}

// TestVerify5x: verify of the real T3 and DL2 datasets reports what the
// timer and DLedger scanners predict (T3: 69 lost, 1 delivered twice, 79
// units at or past the end; DL2: the 121 entries past the committed
// index), and lists the timer and DLedger components as checked.
func TestVerify5x(t *testing.T) {
	for _, c := range []struct {
		ds, now string
		want    map[string]int
		checked []string
	}{
		{"t3-cltrunc", "1796163964732", map[string]int{"rocketmq.timer.message-lost": 69, "rocketmq.timer.duplicate-delivery": 1,
			"rocketmq.timerlog.beyond-commitlog-end": 78, "rocketmq.timerlog.at-recovery-end": 1}, []string{scan.RocketTimerLog, scan.RocketTimerWheel}},
		{"dl2-kill", "", map[string]int{"rocketmq.dledger.uncommitted-entries": 1}, []string{scan.RocketDLedger, scan.RocketDLedgerIndex}},
	} {
		args := []string{"verify", "-o", "jsonl", untar5x(t, c.ds)}
		if c.now != "" {
			args = append(args, "--timer-now", c.now)
		}
		code, out, errOut := runCLI(t, args...)
		codes, fs := findingCodes(t, out)
		for k, n := range c.want {
			if codes[k] != n {
				t.Errorf("%s: %d %s, want %d", c.ds, codes[k], k, n)
			}
		}
		if c.ds == "dl2-kill" {
			for _, f := range fs {
				if f["code"] == "rocketmq.dledger.uncommitted-entries" && f["details"].(map[string]any)["entries"].(float64) != 121 {
					t.Errorf("uncommitted entries: %v", f["details"])
				}
			}
		}
		checked := map[string]bool{}
		for _, x := range jsonlObjects(t, out)[0]["components"].([]any) {
			m := x.(map[string]any)
			checked[m["name"].(string)] = m["checked"] == true
		}
		for _, n := range c.checked {
			if !checked[n] {
				t.Errorf("%s: component %s not checked", c.ds, n)
			}
		}
		if code != exitFindings {
			t.Errorf("%s: exit %d\n%s", c.ds, code, errOut)
		}
	}
}
