package quorum_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"

	genq "github.com/storectl/storectl/internal/gen/quorum"
	"github.com/storectl/storectl/pkg/format/ra"
	"github.com/storectl/storectl/pkg/scan"
	"github.com/storectl/storectl/pkg/scan/quorum"
)

// TestBadEntryWithoutChecksum: the term check runs where no checksum
// vouches for the bytes. A generated store with one segment entry whose
// CRC is 0 (not computed) and one WAL record whose checksum is 0, each
// with its data turned into a non-term, gets a segment-bad-entry and a
// wal-bad-entry at the entries; the same garbage under a computed, holding
// checksum cannot occur (the checksum would fail: segment-crc).
func TestBadEntryWithoutChecksum(t *testing.T) {
	t.Parallel()
	sum, err := genq.Generate(t.TempDir(), genq.Config{Seed: 5, TotalBytes: 2 << 20, SegmentEntries: 256})
	if err != nil {
		t.Fatal(err)
	}
	sys := filepath.Join(sum.Node, "quorum", "rmqbench@localhost")
	segs, _ := filepath.Glob(filepath.Join(sys, "*", "00000001.segment"))
	seg := segs[0]
	b, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	h, _ := ra.DecodeSegmentHeader(b)
	x := ra.DecodeSegmentIndex(h, b[ra.SegmentHeaderLen:h.DataStart()], int(h.MaxCount))
	sl := x.Slots[10]
	binary.BigEndian.PutUint32(b[sl.Pos+28:], 0) // the slot's CRC: not computed
	copy(b[sl.Offset:], bytes.Repeat([]byte{0xEE}, 8))
	if err := os.WriteFile(seg, b, 0o644); err != nil {
		t.Fatal(err)
	}
	wal := filepath.Join(sys, "00000001.wal")
	w, err := os.ReadFile(wal)
	if err != nil {
		t.Fatal(err)
	}
	rd := ra.NewWALReader(bytes.NewReader(w), int64(len(w)))
	var rec ra.WALRecord
	for i := 0; i < 20 && rd.Next(); i++ {
		rec = *rd.Record()
	}
	at := rec.Offset + int64(rec.HeaderLen) - ra.WALFixedLen // checksum field
	binary.BigEndian.PutUint32(w[at:], 0)
	copy(w[rec.Offset+int64(rec.HeaderLen):], bytes.Repeat([]byte{0xEE}, 8))
	if err := os.WriteFile(wal, w, 0o644); err != nil {
		t.Fatal(err)
	}
	res, err := quorum.Scan(context.Background(), quorum.Config{Root: sum.Node}, scan.Options{})
	if err != nil {
		t.Fatal(err)
	}
	fs := findings(res, quorum.CodeSegmentBadEntry)
	if len(fs) != 1 || fs[0].Offset != int64(sl.Offset) || fs[0].Severity != scan.Error {
		t.Fatalf("segment-bad-entry: %+v", fs)
	}
	ws := findings(res, quorum.CodeWALBadEntry)
	if len(ws) != 1 || ws[0].Offset != rec.Offset+int64(rec.HeaderLen) {
		t.Fatalf("wal-bad-entry: %+v (record at %d)", ws, rec.Offset)
	}
	for _, f := range res.Findings {
		if f.Severity != scan.Info && f.Code != quorum.CodeSegmentBadEntry && f.Code != quorum.CodeWALBadEntry {
			t.Errorf("%s %s@%d: %s", f.Code, f.Path, f.Offset, f.Message)
		}
	}
}
