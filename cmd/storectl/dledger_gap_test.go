package main

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"

	"github.com/storectl/storectl/internal/testutil"
)

// TestDLedgerOrderAcrossUnread: the entry after a DLedger data file that
// could not be read follows unknown entries, so its index is only known
// to be above the last one read: with dl2-kill's second data file a
// directory, verify called the third file's first entry index-order
// (error, "recovery stops here", and planned a truncate); a first entry
// whose index is not above the last read one still is.
func TestDLedgerOrderAcrossUnread(t *testing.T) {
	setup := func(t *testing.T) string {
		store := filepath.Join(testutil.Untar(t, testutil.Testdata("rocketmq-5x", "rmq533-dl2-kill.tar.gz")), "store")
		p := filepath.Join(store, "dledger-n0", "data", "00000000000000262144")
		dirInPlace(t, p)
		return store
	}
	order := func(t *testing.T, store string) []map[string]any {
		code, out, errOut := runCLI(t, "verify", store, "-o", "jsonl")
		if code != exitIncomplete {
			t.Fatalf("verify: exit %d, want %d\n%s\n%s", code, exitIncomplete, out, errOut)
		}
		var o []map[string]any
		for _, f := range jsonlObjects(t, out) {
			if f["code"] == "rocketmq.dledger.index-order" {
				o = append(o, f)
			}
		}
		return o
	}
	if o := order(t, setup(t)); len(o) != 0 {
		t.Fatalf("index-order across the unread file: %v", o)
	}
	store := setup(t)
	third := filepath.Join(store, "dledger-n0", "data", "00000000000000524288")
	b, err := os.ReadFile(third)
	if err != nil {
		t.Fatal(err)
	}
	binary.BigEndian.PutUint64(b[8:], 1) // entry index 1: the first file holds it already
	if err := os.WriteFile(third, b, 0o644); err != nil {
		t.Fatal(err)
	}
	// The one damaged, and the entry after it (432 does not follow 1).
	o := order(t, store)
	if len(o) != 2 || o[0]["expected"] != "> 221" || o[1]["expected"] != "2" || o[0]["path"] != "dledger-n0/data/00000000000000524288" || o[0]["offset"].(float64) != 8 || o[0]["actual"] != "1" {
		t.Fatalf("index 1 after the unread file: %v", o)
	}
}
