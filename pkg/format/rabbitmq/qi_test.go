package rabbitmq

import (
	"encoding/binary"
	"errors"
	"path/filepath"
	"testing"

	"github.com/storectl/storectl/pkg/format"
)

const qxQ1 = "6GR38JRPIL3M68J7JM8E1SMBO" // queues/<hash> of q1

// qxQIFixture returns q1's 0.qi and 0.qs from the 3.10 CQv2 crash capture,
// and the offsets of its first slot with location type 1 and type 2
// (found from the raw bytes).
func qxQIFixture(t testing.TB) (qi, qs []byte, loc1, loc2 int) {
	t.Helper()
	for name, b := range qxLoad(t, "rabbitmq/datasets/crash-cqv2.tar.gz") {
		switch {
		case filepath.Base(filepath.Dir(name)) != qxQ1:
		case filepath.Base(name) == "0.qi":
			qi = b
		case filepath.Base(name) == "0.qs":
			qs = b
		}
	}
	if qi == nil || qs == nil {
		t.Fatal("q1 0.qi/0.qs not in crash-cqv2")
	}
	for off := QIHeaderSize; off+QIEntrySize <= len(qi); off += QIEntrySize {
		if qi[off] == 1 && qi[off+3] == 1 && loc1 == 0 {
			loc1 = off
		}
		if qi[off] == 1 && qi[off+3] == 2 && loc2 == 0 {
			loc2 = off
		}
	}
	if loc1 == 0 || loc2 == 0 {
		t.Fatal("fixture lacks a type-1 or type-2 slot")
	}
	return qi, qs, loc1, loc2
}

func qxMutate(b []byte, f func(c []byte)) []byte {
	c := append([]byte(nil), b...)
	f(c)
	return c
}

func TestDecodeQIHeader(t *testing.T) {
	qi, _, _, _ := qxQIFixture(t)
	h, err := DecodeQIHeader(qi)
	if err != nil || h.FromSeqID != 0 || h.ToSeqID != QIDefaultSegmentEntryCount || !h.ReservedZero {
		t.Fatalf("fixture header %+v, %v", h, err)
	}
	for _, tc := range []struct {
		name    string
		b       []byte
		field   string
		off     int64
		wantErr error
	}{
		{"magic", qxMutate(qi, func(c []byte) { c[1] ^= 0xff }), "magic", 0, format.ErrMagic},
		{"version", qxMutate(qi, func(c []byte) { c[4] = 1 }), "version", 4, format.ErrUnsupported},
		{"empty", nil, "magic", 0, format.ErrShort},
		{"short", qi[:40], "reserved", 21, format.ErrShort},
	} {
		_, err := DecodeQIHeader(tc.b)
		var ce *format.CorruptError
		if !qxErrIs(err, tc.field, tc.wantErr) || !errors.As(err, &ce) || ce.Offset != tc.off {
			t.Errorf("%s: %v; want %s@%d %v", tc.name, err, tc.field, tc.off, tc.wantErr)
		}
		if _, err := ReadQI(tc.b); err == nil {
			t.Errorf("%s: ReadQI accepted a bad header", tc.name)
		}
	}
}

func TestDecodeQIEntry(t *testing.T) {
	qi, _, loc1, loc2 := qxQIFixture(t)
	e, err := DecodeQIEntry(qi[loc1:], int64(loc1))
	if err != nil || e.LocType != QILocSharedStore || !e.Persistent || !e.WalkerRef() ||
		[16]byte(qi[loc1+4:loc1+20]) != e.MsgID || e.Size != binary.BigEndian.Uint32(qi[loc1+20:]) {
		t.Fatalf("type-1 slot: %+v, %v", e, err)
	}
	e, err = DecodeQIEntry(qi[loc2:], int64(loc2))
	if err != nil || e.LocType != QILocQueueStore || e.StoreOffset < QSHeaderSize || e.StoreSize == 0 || e.WalkerRef() {
		t.Fatalf("type-2 slot: %+v, %v", e, err)
	}
	for _, tc := range []struct {
		name    string
		at      int // slot offset
		mut     func(c []byte)
		field   string
		rel     int64 // failing byte relative to the slot
		wantErr error
		check   func(e QIEntry) bool
	}{
		{"status 2", loc1, func(c []byte) { c[0] = 2 }, "status", 0, format.ErrInvalid, nil},
		{"flag bit 1", loc1, func(c []byte) { c[1] = 3 }, "flags", 1, format.ErrInvalid, nil},
		{"unused", loc1, func(c []byte) { c[2] = 1 }, "unused", 2, format.ErrInvalid, nil},
		{"location 3", loc1, func(c []byte) { c[3] = 3 }, "location", 3, format.ErrInvalid, nil},
		{"location 0 not zero", loc1, func(c []byte) { c[3] = 0 }, "location", 4, format.ErrInvalid, nil},
		{"type 2 padding", loc2, func(c []byte) { c[19] = 1 }, "location", 16, format.ErrInvalid, nil},
		{"type 2 offset in header", loc2, func(c []byte) { binary.BigEndian.PutUint64(c[4:], 8) }, "storeOffset", 4, format.ErrInvalid, nil},
		{"short", loc1, nil, "entry", 0, format.ErrShort, nil},
		{"recovery drop", loc1, func(c []byte) { c[0] = 0 }, "", 0, nil,
			func(e QIEntry) bool { return e.Dropped() && !e.Acked() && !e.WalkerRef() }},
		{"ack", loc1, func(c []byte) { clear(c[:QIEntrySize]) }, "", 0, nil,
			func(e QIEntry) bool { return e.Acked() && !e.Dropped() }},
		{"transient", loc1, func(c []byte) { c[1] = 0 }, "", 0, nil,
			func(e QIEntry) bool { return !e.Persistent && !e.WalkerRef() }},
		{"walker ignores flag bits", loc1, func(c []byte) { c[1] = 0x81 }, "flags", 1, format.ErrInvalid,
			func(e QIEntry) bool { return e.WalkerRef() }},
	} {
		c := append([]byte(nil), qi[tc.at:tc.at+QIEntrySize]...)
		if tc.mut != nil {
			tc.mut(c)
		} else {
			c = c[:QIEntrySize-1]
		}
		e, err := DecodeQIEntry(c, int64(tc.at))
		var ce *format.CorruptError
		switch {
		case !qxErrIs(err, tc.field, tc.wantErr):
			t.Errorf("%s: %v; want %s %v", tc.name, err, tc.field, tc.wantErr)
		case err != nil && (!errors.As(err, &ce) || ce.Offset != int64(tc.at)+tc.rel):
			t.Errorf("%s: offset %d, want %d", tc.name, ce.Offset, int64(tc.at)+tc.rel)
		case tc.check != nil && !tc.check(e):
			t.Errorf("%s: %+v", tc.name, e)
		}
	}
}

// TestReadQITorn cuts the last present slot of a real .qi in half.
func TestReadQITorn(t *testing.T) {
	qi, _, _, _ := qxQIFixture(t)
	whole, err := ReadQI(qi)
	if err != nil || len(whole.Anomalies) != 0 || len(whole.Records) == 0 {
		t.Fatalf("fixture: %d records, %v, %v", len(whole.Records), whole.Anomalies, err)
	}
	last := whole.Records[len(whole.Records)-1]
	if int(last.Offset)+QIEntrySize != len(qi) {
		t.Fatalf("fixture's last slot %d is not at the end (%d)", last.Offset, len(qi))
	}
	torn, err := ReadQI(qi[:last.Offset+13])
	if err != nil {
		t.Fatal(err)
	}
	if len(torn.Records) != len(whole.Records)-1 {
		t.Errorf("torn file: %d records, want %d", len(torn.Records), len(whole.Records)-1)
	}
	var ce *format.CorruptError
	if len(torn.Anomalies) != 1 || !errors.Is(torn.Anomalies[0], ErrQITornEntry) ||
		!errors.As(torn.Anomalies[0], &ce) || ce.Offset != last.Offset {
		t.Errorf("torn anomalies %v, want one at %d", torn.Anomalies, last.Offset)
	}

}

func FuzzQI(f *testing.F) {
	for _, b := range qxFixtureFiles(f, ".qi") {
		f.Add(b)
		f.Add(b[:len(b)-7])
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		q, err := ReadQI(b)
		if err != nil {
			var ce *format.CorruptError
			if !errors.As(err, &ce) || ce.Offset < 0 || ce.Offset > QIHeaderSize {
				t.Fatalf("header error %v", err)
			}
			return
		}
		n := (len(b) - QIHeaderSize) / QIEntrySize
		if len(q.Records)+q.Acked+q.Dropped > n {
			t.Fatalf("%d records + %d acked + %d dropped > %d slots", len(q.Records), q.Acked, q.Dropped, n)
		}
		for _, r := range q.Records {
			if r.Status != 1 || r.Offset != int64(QIHeaderSize+QIEntrySize*r.Slot) {
				t.Fatalf("record %+v", r)
			}
		}
		for _, a := range q.Anomalies {
			var ce *format.CorruptError
			if !errors.As(a, &ce) || ce.Offset < 0 || ce.Offset > int64(len(b)) {
				t.Fatalf("anomaly %v", a)
			}
		}
	})
}
