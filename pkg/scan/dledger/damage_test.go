package dledger

import (
	"context"
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"

	"github.com/storectl/storectl/internal/testutil"
	"github.com/storectl/storectl/pkg/scan"
)

func private(t *testing.T, ds string) string {
	return filepath.Join(testutil.Untar(t, testutil.Testdata("rocketmq-5x", "rmq533-"+ds+".tar.gz")), "store")
}

func patch(t *testing.T, path string, off int64, b []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

func findAt(t *testing.T, res *scan.Result, code, path string, off int64) scan.Finding {
	t.Helper()
	for _, f := range res.Findings {
		if f.Code == code && f.Path == path && f.Offset == off {
			return f
		}
	}
	t.Fatalf("no %s at %s@%d; findings: %+v", code, path, off, res.Findings)
	return scan.Finding{}
}

func scanStore(t *testing.T, store string) (*scan.Result, *Recovery) {
	t.Helper()
	res, err := Scan(context.Background(), Config{Root: store}, scan.Options{Jobs: 3})
	if err != nil {
		t.Fatal(err)
	}
	return res, res.Extra["dledger"].(*Recovery)
}

// TestDamage: an entry with a bad size, one with a bad position and an
// index unit that disagrees with its entry, each made in a copy of DL1,
// are found at their file and offset, and the predicted recovery stops
// where DLedger's does.
func TestDamage(t *testing.T) {
	const file1 = "dledger-n0/data/00000000000000262144"
	// Entry 262 of DL1 sits at 49326 in file 1 (see rmq533-dl3-hdr.inject.json).
	const pos = 49326
	t.Run("bad-size", func(t *testing.T) {
		store := private(t, "dl1-clean")
		patch(t, filepath.Join(store, file1), pos+4, binary.BigEndian.AppendUint32(nil, 100))
		res, rc := scanStore(t, store)
		f := findAt(t, res, CodeBadEntry, file1, pos+4)
		if f.Severity != scan.Error || rc.WritePos != 262144+pos || rc.LedgerEndIndex != 261 {
			t.Errorf("severity %v, write pos %d, end index %d", f.Severity, rc.WritePos, rc.LedgerEndIndex)
		}
		findAt(t, res, CodeDropped, file1, pos)
	})
	t.Run("bad-pos", func(t *testing.T) {
		store := private(t, "dl1-clean")
		patch(t, filepath.Join(store, file1), pos+24, binary.BigEndian.AppendUint64(nil, 7))
		res, rc := scanStore(t, store)
		findAt(t, res, CodeBadPos, file1, pos+24)
		if rc.WritePos != 262144+pos {
			t.Errorf("write pos %d", rc.WritePos)
		}
	})
	t.Run("index-mismatch", func(t *testing.T) {
		store := private(t, "dl1-clean")
		// Entry 10's index unit: term 5 instead of 0.
		patch(t, filepath.Join(store, "dledger-n0/index/00000000000000000000"), 10*32+24, binary.BigEndian.AppendUint64(nil, 5))
		res, rc := scanStore(t, store)
		f := findAt(t, res, CodeIndexMismatch, "dledger-n0/index/00000000000000000000", 10*32)
		if f.Details["field"] != "term" || rc.LedgerEndIndex != 299 {
			t.Errorf("field %v, end index %d", f.Details["field"], rc.LedgerEndIndex)
		}
	})
}

// TestExit: when DLedger's scan stops more than a file before the last
// data file, recovery calls System.exit(-1); the scan says so.
func TestExit(t *testing.T) {
	store := private(t, "dl2-kill")
	// DL2 has 4 data files; the scan starts at file 1. Break an entry in
	// the middle of file 1 (its pos field).
	data := filepath.Join(store, "dledger-n0/data/00000000000000262144")
	b, err := os.ReadFile(data)
	if err != nil {
		t.Fatal(err)
	}
	off := int64(0)
	for off < 100000 { // walk to the first entry past 100 KB
		off += int64(binary.BigEndian.Uint32(b[off+4:]))
	}
	patch(t, data, off+24, binary.BigEndian.AppendUint64(nil, 1))
	res, rc := scanStore(t, store)
	if !rc.Exit {
		t.Fatalf("no exit predicted: %+v", rc)
	}
	findAt(t, res, CodeExit, "dledger-n0/data/00000000000000262144", off)
}
