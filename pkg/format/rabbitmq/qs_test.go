package rabbitmq

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"testing"

	"github.com/storectl/storectl/pkg/format"
	"github.com/storectl/storectl/pkg/format/etf"
)

// qxQSSlots returns the (StoreOffset, StoreSize) of every type-2 slot of a
// .qi, read from the raw bytes.
func qxQSSlots(qi []byte) [][2]uint64 {
	var out [][2]uint64
	for off := QIHeaderSize; off+QIEntrySize <= len(qi); off += QIEntrySize {
		if qi[off] == 1 && qi[off+3] == 2 {
			out = append(out, [2]uint64{binary.BigEndian.Uint64(qi[off+4:]), uint64(binary.BigEndian.Uint32(qi[off+12:]))})
		}
	}
	return out
}

func TestReadQSEntryFixture(t *testing.T) {
	qi, qs, _, _ := qxQIFixture(t)
	slots := qxQSSlots(qi)
	if len(slots) == 0 {
		t.Fatal("no type-2 slots")
	}
	for _, s := range slots {
		e, err := ReadQSEntry(qs, s[0], uint32(s[1]))
		if err != nil || len(e.Blob) != int(s[1]) || e.Blob[0] != 131 || !e.UseCRC ||
			e.CRC16 != uint16(crc32.ChecksumIEEE(qs[s[0]+8:s[0]+8+s[1]])) {
			t.Errorf("slot %v: %+v, %v", s, e.Size, err)
		}
	}
	t.Logf("%d .qs entries with a valid CRC", len(slots))
}

func TestReadQSEntryErrors(t *testing.T) {
	qi, qs, _, _ := qxQIFixture(t)
	s := qxQSSlots(qi)[0]
	off, size := s[0], uint32(s[1])
	for _, tc := range []struct {
		name   string
		b      []byte
		off    uint64
		size   uint32
		at     int64 // failing byte
		field  string
		reason string
	}{
		{"crc flip", qxMutate(qs, func(c []byte) { c[off+8+uint64(size)/2] ^= 0x01 }), off, size, int64(off) + 5, "crc16", "bad_crc"},
		{"crc field", qxMutate(qs, func(c []byte) { c[off+6] ^= 0x80 }), off, size, int64(off) + 5, "crc16", "bad_crc"},
		{"size differs from index", qs, off, size + 1, int64(off), "size", "bad_size"},
		{"size field flipped", qxMutate(qs, func(c []byte) { c[off+3] ^= 0x04 }), off, size, int64(off), "size", "bad_size"},
		{"truncated entry", qs[:off+8+uint64(size)-1], off, size, int64(off), "size", "bad_size"},
		{"offset at eof", qs, uint64(len(qs)), size, int64(len(qs)), "storeOffset", "eof"},
		{"offset far past eof", qs, 1 << 63, size, 1 << 62, "storeOffset", "eof"},
		{"bad magic", qxMutate(qs, func(c []byte) { c[3] = 'I' }), off, size, 0, "magic", "bad_header"},
		{"bad version", qxMutate(qs, func(c []byte) { c[4] = 9 }), off, size, 4, "version", "bad_header"},
		{"header only", qs[:30], off, size, 21, "reserved", "bad_header"},
	} {
		_, err := ReadQSEntry(tc.b, tc.off, tc.size)
		var ce *format.CorruptError
		if !errors.As(err, &ce) || ce.Offset != tc.at || ce.Field != tc.field || QSDropReason(err) != tc.reason {
			t.Errorf("%s: %v (reason %q); want %s@%d %s", tc.name, err, QSDropReason(err), tc.field, tc.at, tc.reason)
		}
	}
	// Flags bit 0 clear: the broker skips the CRC check.
	noCRC := qxMutate(qs, func(c []byte) { c[off+4] = 0; c[off+8] ^= 0xff })
	if _, err := ReadQSEntry(noCRC, off, size); err != nil {
		t.Errorf("entry without CRC flag: %v", err)
	}
	if _, err := DecodeQSEntry([]byte{0xff, 0xff, 0xff, 0xff, 1, 0, 0, 0}, 100); !qxErrIs(err, "size", format.ErrTooLarge) {
		t.Errorf("huge size: %v", err)
	}
}

func FuzzQS(f *testing.F) {
	qi, qs, _, _ := qxQIFixture(f)
	for _, s := range qxQSSlots(qi) {
		f.Add(qs, s[0], uint32(s[1]))
	}
	f.Add(qs[:70], uint64(64), uint32(0))
	f.Fuzz(func(t *testing.T, b []byte, off uint64, size uint32) {
		e, err := ReadQSEntry(b, off, size)
		if err == nil {
			if uint64(len(e.Blob)) != uint64(size) || !e.CRCOK() || e.Offset != int64(off) {
				t.Fatalf("accepted %+v", e)
			}
			return
		}
		var ce *format.CorruptError
		if !errors.As(err, &ce) || ce.Offset < 0 || QSDropReason(err) == "" {
			t.Fatalf("error %v", err)
		}
		if len(b) >= 8 {
			_, _ = DecodeQSEntry(b, 0)
		}
	})
}

// FuzzTrimQSPadding: the trimmed blob is a prefix of the input, only zero
// bytes were cut, and what was cut followed one complete term. Seeded
// with the fixture's .qs blobs (padded and not) and a padded blob.
func FuzzTrimQSPadding(f *testing.F) {
	qi, qs, _, _ := qxQIFixture(f)
	for _, s := range qxQSSlots(qi) {
		blob := qs[s[0]+QSEntryHeaderSize : s[0]+QSEntryHeaderSize+s[1]]
		f.Add(blob)
		f.Add(append(append([]byte(nil), blob...), 0, 0, 0))
		f.Add(append(append([]byte(nil), blob...), 0, 1))
	}
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		p := TrimQSPadding(b)
		if len(p) > len(b) || !bytes.Equal(p, b[:len(p)]) {
			t.Fatalf("%x is not a prefix of %x", p, b)
		}
		if len(p) == len(b) {
			return
		}
		if !qiAllZero(b[len(p):]) {
			t.Fatalf("cut non-zero bytes %x", b[len(p):])
		}
		if n, err := etf.SkipTerm(b); err != nil || n != len(p) {
			t.Fatalf("cut at %d, term ends at %d (%v)", len(p), n, err)
		}
	})
}
