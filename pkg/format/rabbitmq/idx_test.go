package rabbitmq

import (
	"encoding/binary"
	"errors"
	"testing"

	"github.com/storectl/storectl/pkg/format"
)

// qxIDXPub builds a segment publish record as rabbit_queue_index writes it.
func qxIDXPub(rel uint16, persistent bool, id byte, size uint32, emb []byte) []byte {
	return AppendIDXRecord(nil, IDXRecord{Kind: IDXPublish, RelSeq: rel, Persistent: persistent, MsgID: [16]byte{id}, Size: size, Embedded: emb})
}

func qxIDXRel(rel uint16) []byte {
	return AppendIDXRecord(nil, IDXRecord{Kind: IDXDelAck, RelSeq: rel})
}

// qxJPub builds a journal publish record.
func qxJPub(seq uint64, persistent bool, id byte, emb []byte) []byte {
	return AppendJournalRecord(nil, JournalRecord{Kind: JournalPublish, SeqID: seq, Persistent: persistent, MsgID: [16]byte{id}, Size: 7, Embedded: emb})
}

func qxJOp(kind uint64, seq uint64) []byte {
	return AppendJournalRecord(nil, JournalRecord{Kind: JournalKind(kind), SeqID: seq})
}

func qxCat(parts ...[]byte) []byte {
	var b []byte
	for _, p := range parts {
		b = append(b, p...)
	}
	return b
}

// TestReadIDXFixtures decodes every real segment and journal completely.
func TestReadIDXFixtures(t *testing.T) {
	segs, recs := 0, 0
	for _, b := range qxFixtureFiles(t, ".idx") {
		r, err := ReadIDX(b)
		if err != nil {
			t.Errorf("segment: %v", err)
		}
		end := 0
		for _, x := range r {
			if x.Offset != int64(end) {
				t.Fatalf("record at %d, previous ended at %d", x.Offset, end)
			}
			end += x.Len
		}
		if end != len(b) {
			t.Errorf("segment decoded to %d of %d bytes", end, len(b))
		}
		segs, recs = segs+1, recs+len(r)
	}
	jrecs := 0
	for _, b := range qxFixtureFiles(t, "journal.jif") {
		j, err := ReadJournal(b)
		if err != nil || j.End != int64(len(b)) || j.ZeroEnd {
			t.Errorf("journal: end %d of %d, zero %v, %v", j.End, len(b), j.ZeroEnd, err)
		}
		jrecs += len(j.Records)
	}
	if segs == 0 || jrecs == 0 {
		t.Fatalf("%d segments, %d journal records", segs, jrecs)
	}
	t.Logf("%d segments, %d segment records, %d journal records", segs, recs, jrecs)
}

func TestDecodeIDXRecord(t *testing.T) {
	pub := qxIDXPub(5, true, 0xab, 99, []byte{131, 106})
	for _, tc := range []struct {
		name    string
		b       []byte
		field   string
		at      int64
		wantErr error
		check   func(r IDXRecord) bool
	}{
		{"publish", pub, "", 0, nil, func(r IDXRecord) bool {
			return r.Kind == IDXPublish && r.RelSeq == 5 && r.Persistent && r.MsgID[0] == 0xab &&
				r.Size == 99 && len(r.Embedded) == 2 && r.Len == IDXPublishSize+2
		}},
		{"transient", qxIDXPub(16383, false, 1, 0, nil), "", 0, nil, func(r IDXRecord) bool {
			return !r.Persistent && r.RelSeq == 16383 && r.Embedded != nil && len(r.Embedded) == 0
		}},
		{"del/ack", qxIDXRel(77), "", 0, nil, func(r IDXRecord) bool { return r.Kind == IDXDelAck && r.RelSeq == 77 && r.Len == 2 }},
		{"prefix 00", []byte{0x00, 0x05}, "prefix", 0, ErrIDXBadPrefix, nil},
		{"one byte", []byte{0x40}, "prefix", 0, format.ErrShort, nil},
		{"torn publish", pub[:20], "expiry", 18, format.ErrShort, nil},
		{"torn embedded", pub[:len(pub)-1], "embedded", IDXPublishSize, format.ErrShort, nil},
		{"huge embSize", qxMutate(pub, func(c []byte) { binary.BigEndian.PutUint32(c[30:], 0xffffffff) }), "embSize", 30, format.ErrTooLarge, nil},
	} {
		r, err := DecodeIDXRecord(tc.b, 1000)
		var ce *format.CorruptError
		switch {
		case !qxErrIs(err, tc.field, tc.wantErr):
			t.Errorf("%s: %v; want %s %v", tc.name, err, tc.field, tc.wantErr)
		case err != nil && (!errors.As(err, &ce) || ce.Offset != 1000+tc.at):
			t.Errorf("%s: offset %d, want %d", tc.name, ce.Offset, 1000+tc.at)
		case tc.check != nil && !tc.check(r):
			t.Errorf("%s: %+v", tc.name, r)
		}
	}
	// ReadIDX keeps the records before a bad one and says where it is.
	recs, err := ReadIDX(qxCat(qxIDXRel(1), pub, []byte{0x00}))
	var ce *format.CorruptError
	if len(recs) != 2 || !errors.As(err, &ce) || ce.Offset != int64(2+len(pub)) {
		t.Errorf("bad tail: %d records, %v", len(recs), err)
	}
	if recs, err := ReadIDX(make([]byte, 100)); recs != nil || err != nil || !IDXAllZero(make([]byte, 100)) {
		t.Errorf("all-zero segment: %v, %v", recs, err)
	}
}

func TestReadJournal(t *testing.T) {
	body := qxCat(qxJPub(3, true, 1, nil), qxJOp(2, 3), qxJPub(4, false, 2, []byte{131, 106}), qxJOp(3, 3))
	j, err := ReadJournal(body)
	if err != nil || len(j.Records) != 4 || j.End != int64(len(body)) ||
		j.Records[0].Kind != JournalPublish || !j.Records[0].Persistent || j.Records[0].SeqID != 3 ||
		j.Records[1].Kind != JournalDeliver || j.Records[3].Kind != JournalAck ||
		j.Records[2].Persistent || len(j.Records[2].Embedded) != 2 || j.Records[2].Offset != 48 {
		t.Fatalf("journal %+v, %v", j, err)
	}
	// All-zero padding after a dirty shutdown ends parsing, no error.
	j, err = ReadJournal(qxCat(body, make([]byte, 40), qxJOp(3, 4)))
	if err != nil || !j.ZeroEnd || j.End != int64(len(body)) || len(j.Records) != 4 {
		t.Errorf("zero end: %+v, %v", j, err)
	}
	// 39 zero bytes are not a full zero header: an unparsable tail.
	for _, tc := range []struct {
		name  string
		tail  []byte
		field string
	}{
		{"short zero", make([]byte, 39), "embSize"},
		{"torn op", qxJOp(2, 4)[:5], "seqId"},
		{"torn publish", qxJPub(9, true, 9, []byte{1, 2, 3})[:42], "embedded"},
	} {
		j, err := ReadJournal(qxCat(body, tc.tail))
		var ce *format.CorruptError
		if len(j.Records) != 4 || j.End != int64(len(body)) || !errors.As(err, &ce) ||
			ce.Offset < int64(len(body)) || ce.Field != tc.field {
			t.Errorf("%s: %d records, end %d, %v", tc.name, len(j.Records), j.End, err)
		}
	}
}

func FuzzIDX(f *testing.F) {
	for _, b := range qxFixtureFiles(f, ".idx") {
		f.Add(b)
	}
	f.Add(qxCat(qxIDXPub(1, true, 1, 1, []byte{131}), qxIDXRel(1), qxIDXRel(1)))
	f.Fuzz(func(t *testing.T, b []byte) {
		recs, err := ReadIDX(b)
		end := 0
		for _, r := range recs {
			if r.Offset != int64(end) || r.Len <= 0 {
				t.Fatalf("record %+v after %d", r, end)
			}
			end += r.Len
		}
		var ce *format.CorruptError
		if err != nil && (!errors.As(err, &ce) || ce.Offset < int64(end) || ce.Offset > int64(len(b))) {
			t.Fatalf("error %v after %d", err, end)
		}
	})
}

func FuzzJournal(f *testing.F) {
	for _, b := range qxFixtureFiles(f, "journal.jif") {
		if len(b) > 0 {
			f.Add(b[:min(len(b), 4096)])
		}
	}
	f.Add(qxCat(qxJPub(3, true, 1, nil), qxJOp(2, 3), make([]byte, 40)))
	f.Fuzz(func(t *testing.T, b []byte) {
		j, err := ReadJournal(b)
		end := int64(0)
		for _, r := range j.Records {
			if r.Offset != end || r.Len <= 0 {
				t.Fatalf("record %+v after %d", r, end)
			}
			end += int64(r.Len)
		}
		var ce *format.CorruptError
		if j.End != end || (err != nil && (!errors.As(err, &ce) || ce.Offset < end || ce.Offset > int64(len(b)))) {
			t.Fatalf("end %d, records end %d, %v", j.End, end, err)
		}
	})
}
