package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/storectl/storectl/internal/testutil"
	rmq "github.com/storectl/storectl/pkg/format/rocketmq"
)

// apply runs a writer with --apply into a fresh backup dir and returns
// the backup dir; the run must exit 0.
func apply(t *testing.T, backups string, args ...string) string {
	t.Helper()
	bk := filepath.Join(backups, args[0]+"-"+filepath.Base(t.Name()))
	for i := 0; ; i++ {
		if _, err := os.Stat(bk); os.IsNotExist(err) {
			break
		}
		bk += "x"
	}
	full := append([]string{args[0], "--apply", "--yes", "--backup-dir", bk, "-o", "jsonl"}, args[1:]...)
	if code, out, errOut := runCLI(t, full...); code != exitOK {
		t.Fatalf("%v: exit %d\n%s\n%s", full, code, out, errOut)
	}
	return bk
}

// TestT3TruncateTimerAndOffsets: on T3 (commitlog truncated by a real
// recovery inside message 120) with D1's consumerOffset.json, truncate's
// plan neutralises every timer unit at or past the end (79) and caps the
// 9 committed offsets; after applying it (and rebuild-index for the index
// files the truncation leaves, which truncate only lists) verify is
// clean, and undo restores every byte.
func TestT3TruncateTimerAndOffsets(t *testing.T) {
	store := untar5x(t, "t3-cltrunc")
	b, err := os.ReadFile(testutil.Testdata("rocketmq-5x", "rmq533-d1-consumeroffset.consumerOffset.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(store, rmq.ConsumerOffsetFile), b, 0o644); err != nil {
		t.Fatal(err)
	}
	before := testutil.TreeHash(t, store)
	const now = "1796163964732"
	code, out, _ := runCLI(t, "truncate", "-o", "jsonl", "--timer-now", now, store)
	timer, caps := 0, 0
	// Each action's reason is a finding of the dry run at the path and
	// offset the action names (a timer unit's magic is 12 bytes into the
	// unit; an offset cap replaces the file its findings are in).
	found := map[string]int{}
	for _, o := range jsonlObjects(t, out) {
		if o["type"] == "finding" {
			found[fmt.Sprintf("%v %v", o["code"], o["path"])]++
			found[fmt.Sprintf("%v %v@%v", o["code"], o["path"], o["offset"])]++
		}
	}
	for _, o := range jsonlObjects(t, out) {
		if o["type"] != "action" {
			continue
		}
		key := fmt.Sprintf("%v %v", o["reason"], o["path"])
		if o["op"] == "write-range" {
			key = fmt.Sprintf("%v %v@%v", o["reason"], o["path"], o["offset"].(float64)-12)
		}
		if found[key] == 0 && !strings.HasPrefix(o["reason"].(string), "rocketmq.consumequeue.") {
			t.Errorf("dry run: action %v %v@%v (%v) has no finding it comes from", o["op"], o["path"], o["offset"], o["reason"])
		}
		switch o["reason"] {
		case "rocketmq.timerlog.beyond-commitlog-end", "rocketmq.timerlog.at-recovery-end":
			timer++
			if o["op"] != "write-range" || o["length"].(float64) != 4 {
				t.Errorf("timer action %v", o)
			}
		case "rocketmq.config.consumer-offset-above-max":
			caps++
		}
	}
	if code != exitFindings || timer != 79 || caps != 1 {
		t.Fatalf("dry run: exit %d, %d timer unit actions (want 79), %d offset cap actions (want 1)", code, timer, caps)
	}
	if n := found["rocketmq.config.consumer-offset-above-max "+rmq.ConsumerOffsetFile]; n != 9 {
		t.Errorf("dry run: %d consumer-offset-above-max findings, want the 9 capped offsets", n)
	}
	testutil.SameTree(t, before, testutil.TreeHash(t, store)) // the dry run wrote nothing
	backups := t.TempDir()
	bk1 := apply(t, backups, "truncate", "--timer-now", now, store)
	// What is left after truncate alone: only the index files it lists.
	_, out, _ = runCLI(t, "verify", "-o", "jsonl", "--timer-now", now, store)
	codes, _ := findingCodes(t, out)
	for c := range codes {
		switch c {
		case "rocketmq.index.beyond-end", "rocketmq.coverage.unchecked", "rocketmq.checkpoint.recovery-plan", "rocketmq.timer.recovery-plan",
			"rocketmq.timercheck.ahead-of-consume-queue": // info: recovery clamps it
		default:
			t.Errorf("after truncate: %s (%d)", c, codes[c])
		}
	}
	bk2 := apply(t, backups, "rebuild-index", store)
	code, out, errOut := runCLI(t, "verify", "--timer-now", now, store)
	if code != exitOK {
		t.Fatalf("verify after truncate and rebuild-index: exit %d\n%s\n%s", code, out, errOut)
	}
	// The capped offsets: each at its queue's max.
	nb, _ := os.ReadFile(filepath.Join(store, rmq.ConsumerOffsetFile))
	tab, err := rmq.DecodeConsumerOffsets(nb)
	if err != nil || len(tab.Offsets) != 9 || len(nb) != len(b) {
		t.Fatalf("capped file: %v, %d offsets", err, len(tab.Offsets))
	}
	for _, bk := range []string{bk2, bk1} {
		if code, out, errOut := runCLI(t, "undo", "--apply", "--yes", bk); code != exitOK {
			t.Fatalf("undo %s: exit %d\n%s\n%s", bk, code, out, errOut)
		}
	}
	testutil.SameTree(t, before, testutil.TreeHash(t, store))
}

// TestDLedgerTruncate: on DL3 (an entry index rewritten: DLedger's
// recovery stops after 261), truncate cuts the data, index, checkpoint and
// consume queues where that recovery stops; verify is then clean and
// undo restores every byte.
func TestDLedgerTruncate(t *testing.T) {
	store := untar5x(t, "dl3-hdr")
	before := testutil.TreeHash(t, store)
	code, out, _ := runCLI(t, "truncate", "-o", "jsonl", store)
	paths := map[string]bool{}
	for _, o := range jsonlObjects(t, out) {
		if o["type"] == "action" {
			paths[o["path"].(string)] = true
			if o["path"] == "dledger-n0/data/00000000000000262144" && o["offset"].(float64) != 49326 {
				t.Errorf("data cut at %v, want 49326 (entry 262)", o["offset"])
			}
		}
	}
	for _, p := range []string{"dledger-n0/data/00000000000000262144", "dledger-n0/index/00000000000000000000", "dledger-n0/checkpoint"} {
		if !paths[p] {
			t.Errorf("no action on %s", p)
		}
	}
	if code != exitFindings {
		t.Fatalf("dry run exit %d", code)
	}
	bk := apply(t, t.TempDir(), "truncate", store)
	if code, out, errOut := runCLI(t, "verify", store); code != exitOK {
		t.Fatalf("verify after truncate: exit %d\n%s\n%s", code, out, errOut)
	}
	cp, _ := os.ReadFile(filepath.Join(store, "dledger-n0", "checkpoint"))
	if string(cp) != "committedIndex=261\nendIndex=261\n" {
		t.Errorf("checkpoint %q", cp)
	}
	if code, _, errOut := runCLI(t, "undo", "--apply", "--yes", bk); code != exitOK {
		t.Fatalf("undo: exit %d %s", code, errOut)
	}
	testutil.SameTree(t, before, testutil.TreeHash(t, store))
}

// TestDLedgerRebuildIndex: an index unit damaged in a copy of DL1 is
// found, and rebuild-index --apply writes an index file byte-identical to
// the one the real DLedger wrote; on the undamaged store the plan is empty.
func TestDLedgerRebuildIndex(t *testing.T) {
	store := untar5x(t, "dl1-clean")
	idx := filepath.Join(store, "dledger-n0", "index", "00000000000000000000")
	orig := testutil.TreeHash(t, filepath.Dir(idx))
	if code, out, _ := runCLI(t, "rebuild-index", "-o", "jsonl", store); code != exitOK {
		t.Fatalf("rebuild-index on the real index: exit %d (want an empty plan)\n%s", code, out)
	}
	f, err := os.OpenFile(idx, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte{0, 0, 0, 0, 0, 0, 0, 5}, 10*32+24); err != nil { // unit 10's term
		t.Fatal(err)
	}
	f.Close()
	code, out, _ := runCLI(t, "verify", "-o", "jsonl", store)
	if codes, _ := findingCodes(t, out); codes["rocketmq.dledger.index-mismatch"] != 1 || code != exitFindings {
		t.Fatalf("damaged index unit: exit %d, %v", code, codes)
	}
	apply(t, t.TempDir(), "rebuild-index", store)
	testutil.SameTree(t, orig, testutil.TreeHash(t, filepath.Dir(idx)))
}

// TestRocksDBRebuildMovesAside: rebuild-index on a store with a RocksDB
// consume queue plans to move the database's files to the backup (never
// to write file queues into consumequeue/), and says why.
func TestRocksDBRebuildMovesAside(t *testing.T) {
	store := untar5x(t, "t1-clean")
	cq := filepath.Join(store, "consumequeue")
	os.RemoveAll(cq)
	os.MkdirAll(cq, 0o755)
	for _, n := range []string{"CURRENT", "MANIFEST-000005", "OPTIONS-000007", "000009.sst", "LOCK"} {
		os.WriteFile(filepath.Join(cq, n), []byte("x"), 0o644)
	}
	code, out, _ := runCLI(t, "rebuild-index", "-o", "jsonl", store)
	removed := 0
	for _, o := range jsonlObjects(t, out) {
		if o["type"] == "action" {
			if o["op"] != "remove-file" || filepath.Dir(o["path"].(string)) != "consumequeue" {
				t.Errorf("action %v", o)
			}
			removed++
		}
		if o["type"] == "summary" {
			if _, ok := o["extra"].(map[string]any)["rocksdb_consume_queue"]; !ok {
				t.Errorf("no rocksdb_consume_queue note in %v", o["extra"])
			}
		}
	}
	if code != exitFindings || removed != 5 {
		t.Fatalf("exit %d, %d files moved aside", code, removed)
	}
}
