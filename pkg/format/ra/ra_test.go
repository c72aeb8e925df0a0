package ra_test

import (
	"bytes"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/storectl/storectl/internal/testutil"
	"github.com/storectl/storectl/pkg/format"
	"github.com/storectl/storectl/pkg/format/etf"
	"github.com/storectl/storectl/pkg/format/ra"
)

func TestWALRecordRoundTrip(t *testing.T) {
	var ws ra.WALWriters
	data := []byte{131, 100, 0, 1, 'x'}
	first := ra.WALRecord{WriterRef: 7, UID: []byte("2F_QQ1ABCDEFGHIJKL"), Index: 42, Term: 3, Data: data}
	first.Checksum = first.ComputeChecksum()
	ref := ra.WALRecord{Truncate: true, IsRef: true, WriterRef: 7, Index: 43, Term: 3, Data: nil}
	b := ra.AppendWALRecord(nil, first)
	off2 := int64(len(b))
	b = ra.AppendWALRecord(b, ref)
	r1, err := ra.DecodeWALRecord(b, 0, &ws)
	if err != nil || r1.Index != 42 || string(r1.UID) != "2F_QQ1ABCDEFGHIJKL" || !r1.ChecksumOK() || r1.End() != off2 ||
		r1.HeaderLen != 3+2+18+ra.WALFixedLen || !bytes.Equal(r1.Data, data) {
		t.Fatalf("first: %+v %v", r1, err)
	}
	r2, err := ra.DecodeWALRecord(b[off2:], off2, &ws)
	if err != nil || !r2.Truncate || !r2.IsRef || string(r2.UID) != "2F_QQ1ABCDEFGHIJKL" || r2.Checksum != 0 || !r2.ChecksumOK() || r2.End() != int64(len(b)) {
		t.Fatalf("ref: %+v %v", r2, err)
	}
	// an unknown reference
	var empty ra.WALWriters
	var ce *format.CorruptError
	if _, err := ra.DecodeWALRecord(b[off2:], off2, &empty); !errors.As(err, &ce) || ce.Field != "writer_ref" || ce.Offset != off2 {
		t.Fatalf("unknown ref: %v", err)
	}
	// every cut is ErrShort
	for n := 0; n < int(off2); n++ {
		var w ra.WALWriters
		if _, err := ra.DecodeWALRecord(b[:n], 0, &w); !errors.Is(err, format.ErrShort) {
			t.Fatalf("cut at %d: %v", n, err)
		}
	}
	// a flipped data byte fails the checksum
	bad := append([]byte(nil), b[:off2]...)
	bad[off2-1] ^= 0xff
	r3, _ := ra.DecodeWALRecord(bad, 0, &ra.WALWriters{})
	if r3.ChecksumOK() {
		t.Fatal("flipped byte passed the checksum")
	}
}

func TestWALHeaderAndEnds(t *testing.T) {
	for _, c := range []struct {
		b     []byte
		field string
		err   error
	}{
		{nil, "header", format.ErrShort},
		{[]byte("RAW"), "header", format.ErrShort},
		{[]byte("abec\x0a"), "magic", format.ErrMagic},
		{[]byte("RAWA\x02"), "version", format.ErrUnsupported},
	} {
		var ce *format.CorruptError
		if err := ra.DecodeWALHeader(c.b); !errors.As(err, &ce) || ce.Field != c.field || !errors.Is(err, c.err) {
			t.Errorf("%q: %v", c.b, err)
		}
	}
	rec := ra.WALRecord{UID: []byte("U1"), Index: 1, Term: 1, Data: []byte{131, 106}}
	rec.Checksum = rec.ComputeChecksum()
	one := ra.AppendWALRecord(ra.AppendWALHeader(nil), rec)
	for _, c := range []struct {
		name   string
		b      []byte
		recs   int
		reason string
		at     int64
	}{
		{"clean", one, 1, ra.WALEndEOF, int64(len(one))},
		{"torn", one[:len(one)-1], 0, ra.WALEndPartial, 5},
		{"zero tail", append(append([]byte(nil), one...), make([]byte, 64)...), 1, ra.WALEndZero, int64(len(one))},
		{"short zero tail", append(append([]byte(nil), one...), 0, 0, 0), 1, ra.WALEndPartial, int64(len(one))},
		{"header only", ra.AppendWALHeader(nil), 0, ra.WALEndEOF, 5},
	} {
		r := ra.NewWALReader(bytes.NewReader(c.b), int64(len(c.b)))
		n := 0
		for r.Next() {
			n++
		}
		reason, at := r.End()
		if r.Err() != nil || n != c.recs || reason != c.reason || at != c.at {
			t.Errorf("%s: %d records, end %s@%d, err %v", c.name, n, reason, at, r.Err())
		}
	}
}

func TestIsLastWALRecord(t *testing.T) {
	if !ra.IsLastWALRecord(nil) || !ra.IsLastWALRecord(make([]byte, 12)) || !ra.IsLastWALRecord(append(make([]byte, 13), 1)) {
		t.Fatal("last record not recognised")
	}
	if ra.IsLastWALRecord(append(make([]byte, 12), 1)) {
		t.Fatal("a record after it counted as the end")
	}
}

func TestSegmentRoundTrip(t *testing.T) {
	for _, version := range []uint16{1, 2} {
		h := ra.SegmentHeader{Version: version, MaxCount: 4}
		datas := [][]byte{{131, 106}, {131, 97, 1}, {131, 97, 2}}
		b := ra.AppendSegmentHeader(nil, h)
		off := uint64(h.DataStart())
		idx := []uint64{5, 6, 5} // the third slot overwrites 5 and drops 6
		var table []byte
		for i, d := range datas {
			table = ra.AppendSegmentSlot(table, ra.SegmentSlot{Index: idx[i], Term: 1, Offset: off, Length: uint32(len(d)),
				CRC: checksum(d)}, version)
			off += uint64(len(d))
		}
		b = append(b, table...)
		b = append(b, make([]byte, int(h.DataStart())-len(b))...)
		for _, d := range datas {
			b = append(b, d...)
		}
		s, err := ra.OpenSegment(bytes.NewReader(b), int64(len(b)))
		if err != nil {
			t.Fatal(err)
		}
		if len(s.Index.Slots) != 3 || s.Index.LiveCount() != 1 || !livePos(s.Index, 5, 2) || len(s.Index.Trimmed) != 2 || s.Index.Partial {
			t.Fatalf("v%d index: %+v", version, s.Index)
		}
		for i, sl := range s.Index.Slots {
			d, err := s.Data(sl)
			if err != nil || !bytes.Equal(d, datas[i]) || !sl.CRCOK(d) {
				t.Fatalf("v%d slot %d: %q %v", version, i, d, err)
			}
		}
		// a flipped data byte fails the CRC
		b[len(b)-1] ^= 1
		s, _ = ra.OpenSegment(bytes.NewReader(b), int64(len(b)))
		d, _ := s.Data(s.Index.Slots[2])
		if s.Index.Slots[2].CRCOK(d) {
			t.Fatal("flipped byte passed the CRC")
		}
		// the table cut inside a slot
		cut := b[:ra.SegmentHeaderLen+h.SlotSize()+3]
		s, err = ra.OpenSegment(bytes.NewReader(cut), int64(len(cut)))
		if err != nil || !s.Index.Partial || len(s.Index.Slots) != 1 {
			t.Fatalf("cut table: %+v %v", s, err)
		}
		if _, err := s.Data(s.Index.Slots[0]); !errors.Is(err, format.ErrShort) {
			t.Fatalf("data past end: %v", err)
		}
	}
	if _, err := ra.DecodeSegmentHeader([]byte("RASG\x00\x03\x10\x00")); !errors.Is(err, format.ErrUnsupported) {
		t.Fatalf("version 3: %v", err)
	}
	if _, err := ra.DecodeSegmentHeader([]byte("RAWA\x00\x02\x10\x00")); !errors.Is(err, format.ErrMagic) {
		t.Fatalf("magic: %v", err)
	}
}

// TestSegmentMaxCountOverflow: segment_max_entries 65536 is written as a
// 0 MaxCount (rabbitmq-server #9727); the reader notices data after the
// header and reads a 65536-slot table.
func TestSegmentMaxCountOverflow(t *testing.T) {
	h := ra.SegmentHeader{Version: 2, MaxCount: 0}
	b := ra.AppendSegmentHeader(nil, h)
	start := uint64(ra.SegmentHeaderLen + 65536*ra.SegmentSlotV2)
	b = ra.AppendSegmentSlot(b, ra.SegmentSlot{Index: 1, Term: 1, Offset: start, Length: 2, CRC: checksum([]byte{131, 106})}, 2)
	b = append(b, make([]byte, int(start)-len(b))...)
	b = append(b, 131, 106)
	s, err := ra.OpenSegment(bytes.NewReader(b), int64(len(b)))
	if err != nil || !s.Overflow || s.MaxCount != 65536 || len(s.Index.Slots) != 1 || s.DataStart() != int64(start) {
		t.Fatalf("%+v %v", s, err)
	}
}

func TestSnapshotRoundTrip(t *testing.T) {
	meta, _ := etf.EncodeTerm(etf.Map{
		{Key: etf.Atom("index"), Value: int64(12007)},
		{Key: etf.Atom("term"), Value: int64(1)},
		{Key: etf.Atom("cluster"), Value: etf.Map{{Key: etf.Tuple{etf.Atom("%2F_q"), etf.Atom("n@h")}, Value: etf.Map{}}}},
		{Key: etf.Atom("machine_version"), Value: int64(5)},
	}, etf.AtomsUTF8)
	state, _ := etf.EncodeTerm(etf.Tuple{etf.Atom("rabbit_fifo")}, etf.AtomsUTF8)
	b := ra.AppendSnapshot(nil, meta, state)
	s, err := ra.DecodeSnapshot(b)
	if err != nil || !s.CRCOK || s.Meta.Index != 12007 || s.Meta.Term != 1 || s.Meta.MachineVersion != 5 ||
		len(s.Meta.Cluster) != 1 || s.Meta.Cluster[0].Name != "%2F_q" || !bytes.Equal(s.State, state) {
		t.Fatalf("%+v %v", s, err)
	}
	b[len(b)-1] ^= 1
	if s, err := ra.DecodeSnapshot(b); err != nil || s.CRCOK {
		t.Fatalf("flipped: %+v %v", s, err)
	}
	b[len(b)-1] ^= 1
	b[20] ^= 0x40 // inside meta: CRC fails even when the term still decodes
	if s, _ := ra.DecodeSnapshot(b); s.CRCOK {
		t.Fatal("flipped meta passed the CRC")
	}
	for _, c := range []struct {
		b   []byte
		err error
	}{{[]byte("RASN\x01"), format.ErrShort}, {[]byte("RASX\x01\x00\x00\x00\x00\x00\x00\x00\x00"), format.ErrMagic}, {[]byte("RASN\x02\x00\x00\x00\x00\x00\x00\x00\x00"), format.ErrUnsupported}, {[]byte("RASN\x01\x00\x00\x00\x00\x00\x00\x00\x09"), format.ErrShort}} {
		if _, err := ra.DecodeSnapshot(c.b); !errors.Is(err, c.err) {
			t.Errorf("%q: %v", c.b, err)
		}
	}
}

func TestNames(t *testing.T) {
	for _, c := range []struct {
		name string
		n    uint64
		w    int
		ok   bool
	}{
		{"00000021.wal", 21, 8, true}, {"0000000000000021.wal", 21, 16, true}, {"123456789.wal", 123456789, 9, true},
		{"21.wal", 0, 0, false}, {"0000002x.wal", 0, 0, false}, {"00000021.segment", 0, 0, false},
	} {
		fn, ok := ra.ParseFileName(c.name, "wal")
		if ok != c.ok || fn.N != c.n || fn.Width != c.w {
			t.Errorf("%s: %+v %v", c.name, fn, ok)
		}
		if ok && ra.FileName(fn.N, fn.Width, "wal") != c.name {
			t.Errorf("%s: FileName %s", c.name, ra.FileName(fn.N, fn.Width, "wal"))
		}
	}
	if d := ra.SnapshotDirName(1, 12007); d != "0000000000000001_0000000000002EE7" {
		t.Fatal(d)
	}
	if tm, i, ok := ra.ParseSnapshotDirName("0000000000000001_0000000000002EE7"); !ok || tm != 1 || i != 12007 {
		t.Fatal(tm, i, ok)
	}
	if _, _, ok := ra.ParseSnapshotDirName("1_2EE7"); ok {
		t.Fatal("short name accepted")
	}
}

// TestConfigFixtures: every replica config of Q1-Q3 names its own dir
// (uid), its queue and vhost, and its members.
func TestConfigFixtures(t *testing.T) {
	n := 0
	for _, set := range qqSets(t) {
		paths, _ := filepath.Glob(filepath.Join(set.node, "*", "*", "*", "config"))
		for _, p := range paths {
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			c, err := ra.ParseConfig(b)
			if err != nil {
				t.Fatalf("%s: %v", p, err)
			}
			n++
			if c.UID != filepath.Base(filepath.Dir(p)) || c.ID.Node != "rmq40@localhost" {
				t.Errorf("%s: %+v", p, c)
			}
			if strings.Contains(p, "/quorum/") {
				if c.MachineModule != "rabbit_fifo" || c.VHost != "/" || !strings.HasPrefix(c.Queue, "qq") ||
					c.FriendlyName != "queue '"+c.Queue+"' in vhost '/'" || c.ClusterName != "%2F_"+c.Queue ||
					len(c.InitialMembers) != 1 || c.DeliveryLimit() != 20 {
					t.Errorf("%s: %+v", p, c)
				}
			}
		}
	}
	if n < 8 {
		t.Fatalf("%d configs", n)
	}
}

// TestSnapshotFixture: the Q1 snapshot decodes, its CRC holds and its meta
// is the oracle's (ra_log_snapshot:read_meta/1).
func TestSnapshotFixture(t *testing.T) {
	set := qqSets(t)[0]
	dir := filepath.Join(set.node, "quorum", "rmq40@localhost", "2F_QQ109LB4B9AV3QD", "snapshots", "0000000000000001_0000000000002EE7")
	b, err := os.ReadFile(filepath.Join(dir, ra.SnapshotFile))
	if err != nil {
		t.Fatal(err)
	}
	s, err := ra.DecodeSnapshot(b)
	if err != nil || !s.CRCOK {
		t.Fatalf("%v %v", err, s.CRCOK)
	}
	o := testutil.ReadJSONL[struct {
		Kind string `json:"kind"`
		Meta string `json:"meta"`
		Size int    `json:"size"`
	}](t, filepath.Join(set.oracle, "quorum", "2F_QQ109LB4B9AV3QD", "snapshots-0000000000000001_0000000000002EE7.jsonl"))
	if o[0].Kind != "snapshot_meta" || o[0].Size != len(b) ||
		o[0].Meta != "{ok,#{index => 12007,term => 1,machine_version => 5,cluster => #{{'%2F_qq1',rmq40@localhost} => #{}}}}" {
		t.Fatalf("oracle: %+v", o[0])
	}
	if s.Meta.Index != 12007 || s.Meta.Term != 1 || s.Meta.MachineVersion != 5 || len(s.Meta.Cluster) != 1 ||
		s.Meta.Cluster[0] != (ra.ServerID{Name: "%2F_qq1", Node: "rmq40@localhost"}) {
		t.Fatalf("%+v", s.Meta)
	}
}

func checksum(b []byte) uint32 { return crc32.ChecksumIEEE(b) }

func livePos(x *ra.SegmentIndex, idx uint64, want int) bool {
	p, ok := x.LivePos(idx)
	return ok && p == want
}

// TestSegmentIndexLive checks the live slots of a table whose indexes
// only grow (no map is built for it) against one that repeats and drops
// indexes (the map): positions, count, range and lookups.
func TestSegmentIndexLive(t *testing.T) {
	build := func(idx []uint64) *ra.SegmentIndex {
		h := ra.SegmentHeader{Version: 2, MaxCount: uint16(len(idx) + 1)}
		var table []byte
		for i, x := range idx {
			table = ra.AppendSegmentSlot(table, ra.SegmentSlot{Index: x, Term: 1, Offset: uint64(100 + i), Length: 1, CRC: 1}, 2)
		}
		return ra.DecodeSegmentIndex(h, table, int(h.MaxCount))
	}
	for _, c := range []struct {
		idx         []uint64
		live        []int // positions, in table order
		first, last uint64
	}{
		{[]uint64{7, 8, 9, 12}, []int{0, 1, 2, 3}, 7, 12},
		{[]uint64{0, 1}, []int{0, 1}, 0, 1},
		{[]uint64{7, 8, 9, 8, 9}, []int{0, 3, 4}, 7, 9},
		{[]uint64{7, 7}, []int{1}, 7, 7},
		{[]uint64{7, 8, 9, 5}, []int{3}, 5, 5},
	} {
		x := build(c.idx)
		if got := x.LivePositions(); fmt.Sprint(got) != fmt.Sprint(c.live) || x.LiveCount() != len(c.live) {
			t.Errorf("%v: live %v (count %d), want %v", c.idx, got, x.LiveCount(), c.live)
		}
		if f, l, ok := x.Range(); !ok || f != c.first || l != c.last {
			t.Errorf("%v: range %d-%d %v, want %d-%d", c.idx, f, l, ok, c.first, c.last)
		}
		for _, p := range c.live {
			if got, ok := x.LivePos(c.idx[p]); !ok || got != p {
				t.Errorf("%v: LivePos(%d) = %d %v, want %d", c.idx, c.idx[p], got, ok, p)
			}
		}
		if _, ok := x.LivePos(100); ok {
			t.Errorf("%v: index 100 is live", c.idx)
		}
	}
	if _, _, ok := build(nil).Range(); ok {
		t.Error("an empty table has a range")
	}
}

// TestOpenSegmentReusing reads segments of 3, 200, 1 and 0 slots (and
// one whose header is bad) one after another, each reusing the reader
// before: every index and every slot's data are those of a fresh
// OpenSegment (no slot of a larger segment before is left over).
func TestOpenSegmentReusing(t *testing.T) {
	mk := func(n int) []byte {
		h := ra.SegmentHeader{Version: 2, MaxCount: 256}
		b := ra.AppendSegmentHeader(nil, h)
		off := uint64(h.DataStart())
		var table, data []byte
		for i := 0; i < n; i++ {
			d := []byte{131, 97, byte(i), byte(n)}
			table = ra.AppendSegmentSlot(table, ra.SegmentSlot{Index: uint64(i + 1), Term: 1, Offset: off, Length: uint32(len(d)), CRC: checksum(d)}, 2)
			off += uint64(len(d))
			data = append(data, d...)
		}
		b = append(b, table...)
		b = append(b, make([]byte, int(h.DataStart())-len(b))...)
		return append(b, data...)
	}
	dump := func(s *ra.SegmentReader) string {
		out := fmt.Sprintf("%+v %d %v|", s.Header, len(s.Index.Slots), s.Index.Partial)
		for _, sl := range s.Index.Slots {
			d, err := s.Data(sl)
			out += fmt.Sprintf("%+v %x %v;", sl, d, err)
		}
		return out
	}
	var prev *ra.SegmentReader
	for _, b := range [][]byte{mk(3), mk(200), []byte("RASGxxxxxx"), mk(1), mk(0), mk(200)} {
		fresh, ferr := ra.OpenSegment(bytes.NewReader(b), int64(len(b)))
		s, err := ra.OpenSegmentReusing(bytes.NewReader(b), int64(len(b)), prev)
		if (err == nil) != (ferr == nil) {
			t.Fatalf("errors differ: %v, fresh %v", err, ferr)
		}
		if err != nil {
			continue
		}
		if got, want := dump(s), dump(fresh); got != want {
			t.Fatalf("reusing:\n%s\nfresh:\n%s", got, want)
		}
		prev = s
	}
}
