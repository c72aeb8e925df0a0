package main

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"

	"github.com/storectl/storectl/internal/testutil"
)

// TestUnreadBeforeRecoveryStart: after an unclean stop recoverAbnormally
// starts at a later commitlog file and never reads the ones before it, so
// a file before the start that storectl cannot read (a directory in its
// place) changes neither the recovery end nor the plan, and what points
// into it is unknown, not damaged. With b-abnormal's first file a
// directory, verify called the 82 consume queue units and 152 index
// entries pointing into it bad-unit/bad-entry ("points at an offset no
// commitlog file holds", 4680 bytes of damaged regions). A unit damaged
// in a file that was read is still bad-unit.
func TestUnreadBeforeRecoveryStart(t *testing.T) {
	fresh := func(t *testing.T) string {
		return filepath.Join(testutil.Untar(t, testutil.Testdata("rocketmq", "rmq533-b-abnormal.tar.gz")), "store")
	}
	verify := func(t *testing.T, store string, want int) ([]map[string]any, map[string]any) {
		code, out, errOut := runCLI(t, "verify", store, "-o", "jsonl")
		if code != want {
			t.Fatalf("verify: exit %d, want %d\n%s\n%s", code, want, out, errOut)
		}
		objs := jsonlObjects(t, out)
		return objs, objs[len(objs)-1]
	}
	_, sum := verify(t, fresh(t), exitOK)
	wantEnd := sum["recovery_end"]
	if wantEnd == nil {
		t.Fatalf("undamaged store: no recovery end: %v", sum)
	}

	store := fresh(t)
	const file0 = "commitlog/00000000000000000000"
	first := filepath.Join(store, filepath.FromSlash(file0))
	st, err := os.Stat(first)
	if err != nil {
		t.Fatal(err)
	}
	// The units that point into file 0, counted from the consume queue
	// files themselves (20-byte units: offset, size, tags code).
	// One unit into a file that is read (the recovery's start file) is
	// moved a byte into its record: that one is still bad-unit.
	into := 0
	var tampered *cqUnit
	for _, u := range cqUnits(t, store) {
		switch {
		case u.off < st.Size():
			into++
		case u.off >= 786432 && tampered == nil:
			tampered = &u
			patchFile(t, u.file, func(b []byte) []byte { binary.BigEndian.PutUint64(b[u.at:], uint64(u.off+1)); return b })
		}
	}
	if into == 0 || tampered == nil {
		t.Fatal("fixture: no consume queue unit points into the first commitlog file, or none into the start file")
	}
	tamperedAt, tamperedPhy := tampered.at, tampered.off
	tamperedRel, _ := filepath.Rel(store, tampered.file)
	dirInPlace(t, first)
	objs, sum := verify(t, store, exitIncomplete)
	if sum["recovery_end"] != wantEnd {
		t.Fatalf("recovery end %v, want %v as without the damage (recovery never reads file 0)", sum["recovery_end"], wantEnd)
	}
	units, entries, bad := 0, 0, 0
	for _, o := range objs {
		d, _ := o["details"].(map[string]any)
		switch o["code"] {
		case "rocketmq.consumequeue.bad-unit":
			if o["path"] != filepath.ToSlash(tamperedRel) || int(o["offset"].(float64)) != tamperedAt {
				t.Fatalf("what points into the unread file called damaged: %v", o)
			}
			bad++
		case "rocketmq.consumequeue.missing":
			if int64(d["phy_offset"].(float64)) != tamperedPhy { // the moved unit's record has lost its unit
				t.Fatalf("what points into the unread file called damaged: %v", o)
			}
		case "rocketmq.index.bad-entry":
			t.Fatalf("what points into the unread file called damaged: %v", o)
		case "rocketmq.consumequeue.unknown", "rocketmq.index.unknown":
			w, _ := d["waits_on"].([]any)
			if len(w) != 1 || w[0] != file0 || o["severity"] != "warning" {
				t.Fatalf("unknown finding: %v", o)
			}
			if o["code"] == "rocketmq.consumequeue.unknown" {
				units += int(d["units"].(float64))
			} else {
				entries += int(d["entries"].(float64))
			}
		}
	}
	if bad != 1 {
		t.Fatalf("the unit moved into its record in a file that was read: %d bad-unit findings, want 1", bad)
	}
	if units != into || entries == 0 {
		t.Fatalf("%d units and %d index entries unknown; %d units point into %s", units, entries, into, file0)
	}
}
