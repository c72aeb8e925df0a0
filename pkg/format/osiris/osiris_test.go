package osiris_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/storectl/storectl/internal/streamtest"
	"github.com/storectl/storectl/pkg/format"
	"github.com/storectl/storectl/pkg/format/amqp10"
	"github.com/storectl/storectl/pkg/format/osiris"
)

// realFiles returns every segment and index file of the 4.0.5 and
// 3.10.8 datasets.
func realFiles(t testing.TB) (segments, indexes []string) {
	for _, ds := range streamtest.All {
		for _, d := range streamtest.StreamDirs(t, ds) {
			s, _ := filepath.Glob(filepath.Join(d, "*.segment"))
			x, _ := filepath.Glob(filepath.Join(d, "*.index"))
			segments = append(segments, s...)
			indexes = append(indexes, x...)
		}
	}
	return segments, indexes
}

// TestEncodeRealFiles re-encodes every real segment (chunks from their
// decoded fields and entries, AMQP messages from their decoded sections)
// and every real index, and wants the broker's bytes back.
func TestEncodeRealFiles(t *testing.T) {
	segs, idxs := realFiles(t)
	var chunks, msgs int
	for _, p := range segs {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		sr, err := osiris.NewSegmentReader(bytes.NewReader(b), int64(len(b)))
		if err != nil {
			t.Fatal(err)
		}
		out := osiris.AppendSegmentHeader(nil)
		for sr.Next() {
			c := sr.Chunk()
			spec := osiris.ChunkSpec{Type: c.Header.Type, Timestamp: c.Header.Timestamp, Epoch: c.Header.Epoch,
				ChunkID: c.Header.ChunkID, Filter: c.Filter, Trailer: c.Trailer}
			it := osiris.Entries(c.Data, c.Pos+c.Header.DataOffset())
			for it.Next() {
				e := it.Entry()
				if c.Header.Type == osiris.ChunkUser {
					m, err := amqp10.DecodeMessage(e.Body, e.Pos+4)
					if err != nil {
						t.Fatalf("%s: %v", p, err)
					}
					re, err := amqp10.AppendMessage(nil, m)
					if err != nil || !bytes.Equal(re, e.Body) {
						t.Fatalf("%s@%d: message re-encodes differently (%v)", p, e.Pos, err)
					}
					msgs++
				}
				spec.Entries = append(spec.Entries, e)
			}
			if it.Err() != nil {
				t.Fatal(it.Err())
			}
			out = osiris.AppendChunk(out, spec)
			chunks++
		}
		if sr.Err() != nil {
			t.Fatal(sr.Err())
		}
		if !bytes.Equal(out, b) {
			t.Errorf("%s: re-encoded segment differs", p)
		}
	}
	for _, p := range idxs {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		x, err := osiris.NewIndexReader(bytes.NewReader(b), int64(len(b)))
		if err != nil {
			t.Fatal(err)
		}
		out := osiris.AppendIndexHeader(nil)
		for x.Next() {
			out = osiris.AppendIndexRecord(out, x.Record())
		}
		if !bytes.Equal(out, b) {
			t.Errorf("%s: re-encoded index differs", p)
		}
	}
	t.Logf("%d segments (%d chunks, %d messages) and %d indexes re-encoded byte for byte", len(segs), chunks, msgs, len(idxs))
}

// TestTracking decodes the real trailers (writer sequences) and the
// tracking-snapshot chunk each later segment starts with.
func TestTracking(t *testing.T) {
	segs, _ := realFiles(t)
	var trailers, snaps int
	for _, p := range segs {
		b, _ := os.ReadFile(p)
		sr, err := osiris.NewSegmentReader(bytes.NewReader(b), int64(len(b)))
		if err != nil {
			t.Fatal(err)
		}
		for sr.Next() {
			c := sr.Chunk()
			if len(c.Trailer) > 0 {
				ts, err := osiris.DecodeTrailer(c.Trailer, c.End()-int64(len(c.Trailer)))
				if err != nil || len(ts) == 0 {
					t.Fatalf("%s@%d trailer: %v", p, c.Pos, err)
				}
				for _, tr := range ts {
					if tr.Type != osiris.TrackingSequence || len(tr.ID) == 0 {
						t.Fatalf("%s@%d: trailer %+v", p, c.Pos, tr)
					}
					if re := osiris.AppendTracking(nil, tr, false); !bytes.Contains(c.Trailer, re) {
						t.Fatalf("%s@%d: tracking re-encodes differently", p, c.Pos)
					}
				}
				trailers++
			}
			if c.Header.Type == osiris.ChunkTrackingSnapshot {
				it := osiris.Entries(c.Data, c.Pos+c.Header.DataOffset())
				for it.Next() {
					e := it.Entry()
					ts, err := osiris.DecodeTrackingSnapshot(e.Body, e.Pos+4)
					if err != nil {
						t.Fatalf("%s@%d snapshot: %v", p, c.Pos, err)
					}
					var re []byte
					for _, tr := range ts {
						re = osiris.AppendTracking(re, tr, true)
						if tr.Type == osiris.TrackingSequence && tr.ChunkID > c.Header.ChunkID {
							t.Errorf("%s@%d: snapshot sequence chunk %d after the chunk %d", p, c.Pos, tr.ChunkID, c.Header.ChunkID)
						}
					}
					if !bytes.Equal(re, e.Body) {
						t.Fatalf("%s@%d: snapshot re-encodes differently", p, c.Pos)
					}
				}
				snaps++
			}
		}
	}
	if trailers == 0 || snaps == 0 {
		t.Fatalf("%d trailers, %d snapshots", trailers, snaps)
	}
}

func firstSegment(t *testing.T) []byte {
	segs, _ := realFiles(t)
	for _, p := range segs {
		if strings.Contains(p, "__s1c_") && strings.HasSuffix(p, "00000000000000000000.segment") {
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			return b
		}
	}
	t.Fatal("no s1c segment")
	return nil
}

// TestTornSegment cuts a real segment at every byte of its last chunk and
// at a header: the reader returns every whole chunk, then ErrShort at the
// cut field with the partial chunk's bytes, and the whole entries of a cut
// data section are the ones Entries still yields.
func TestTornSegment(t *testing.T) {
	b := firstSegment(t)
	sr, _ := osiris.NewSegmentReader(bytes.NewReader(b), int64(len(b)))
	var ends []int64
	var last osiris.Chunk
	for sr.Next() {
		ends = append(ends, sr.Chunk().End())
		last = *sr.Chunk()
	}
	lastStart := last.Pos
	for cut := lastStart + 1; cut < int64(len(b)); cut += 7 {
		sr, err := osiris.NewSegmentReader(bytes.NewReader(b[:cut]), cut)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for sr.Next() {
			n++
		}
		if n != len(ends)-1 {
			t.Fatalf("cut %d: %d whole chunks, want %d", cut, n, len(ends)-1)
		}
		var ce *format.CorruptError
		if !errors.As(sr.Err(), &ce) || !errors.Is(ce, format.ErrShort) {
			t.Fatalf("cut %d: err %v", cut, sr.Err())
		}
		if sr.Pos() != lastStart {
			t.Fatalf("cut %d: pos %d, want %d", cut, sr.Pos(), lastStart)
		}
		h, part := sr.Partial()
		if int64(len(part)) != cut-lastStart {
			t.Fatalf("cut %d: partial %d bytes", cut, len(part))
		}
		if cut-lastStart < osiris.ChunkHeaderSize {
			if h != nil || ce.Field != "chunk header" {
				t.Fatalf("cut %d in header: %v %v", cut, h, ce)
			}
			continue
		}
		if h == nil || h.ChunkID != last.Header.ChunkID {
			t.Fatalf("cut %d: header %v", cut, h)
		}
		data := part[min(int64(len(part)), h.DataOffset()):min(int64(len(part)), h.DataOffset()+int64(h.DataSize))]
		it := osiris.Entries(data, 0)
		whole := 0
		for it.Next() {
			whole++
		}
		want := 0
		full := osiris.Entries(last.Data, 0)
		for full.Next() {
			if int64(full.Consumed()) <= int64(len(data)) {
				want++
			}
		}
		if whole != want {
			t.Fatalf("cut %d: %d whole entries, want %d", cut, whole, want)
		}
	}
}

func TestHeaders(t *testing.T) {
	for _, c := range []struct {
		b    string
		seg  error
		want string
	}{
		{"OSIL\x00\x00\x00\x01", nil, ""},
		{"OSII\x00\x00\x00\x01", format.ErrMagic, "magic"},
		{"OSIL\x00\x00\x00\x02", format.ErrUnsupported, "version"},
		{"OSI", format.ErrShort, "file header"},
		{"XX", format.ErrMagic, "magic"},
		{"", format.ErrShort, "file header"},
	} {
		err := osiris.DecodeSegmentHeader([]byte(c.b), 0)
		if !errors.Is(err, c.seg) && !(err == nil && c.seg == nil) {
			t.Errorf("%q: %v, want %v", c.b, err, c.seg)
		}
		var ce *format.CorruptError
		if errors.As(err, &ce) && ce.Field != c.want {
			t.Errorf("%q: field %q, want %q", c.b, ce.Field, c.want)
		}
	}
	if err := osiris.DecodeIndexHeader([]byte("OSII\x00\x00\x00\x01"), 0); err != nil {
		t.Error(err)
	}
}

func TestChunkHeaderErrors(t *testing.T) {
	h := osiris.AppendChunkHeader(nil, osiris.ChunkHeader{Type: osiris.ChunkUser, NumEntries: 1, NumRecords: 1, DataSize: 5})
	if len(h) != osiris.ChunkHeaderSize || h[0] != 0x50 {
		t.Fatalf("header % x", h)
	}
	for _, c := range []struct {
		mut   func([]byte)
		err   error
		field string
		off   int64
	}{
		{func(b []byte) { b[0] = 0x40 }, format.ErrMagic, "magic", 100},
		{func(b []byte) { b[0] = 0x51 }, format.ErrUnsupported, "version", 100},
		{func(b []byte) { b[1] = 3 }, format.ErrInvalid, "chunk type", 101},
	} {
		b := append([]byte(nil), h...)
		c.mut(b)
		_, err := osiris.DecodeChunkHeader(b, 100)
		var ce *format.CorruptError
		if !errors.As(err, &ce) || !errors.Is(err, c.err) || ce.Field != c.field || ce.Offset != c.off {
			t.Errorf("%v, want %v %s@%d", err, c.err, c.field, c.off)
		}
	}
	// a chunk whose data runs past the input
	b := append(append([]byte(nil), h...), 1, 2)
	if _, err := osiris.DecodeChunk(b, 8); !errors.Is(err, format.ErrShort) {
		t.Errorf("short chunk: %v", err)
	} else if ce := err.(*format.CorruptError); ce.Field != "data" || ce.Offset != 8+48 {
		t.Errorf("short chunk: %v", ce)
	}
}

func TestSubBatch(t *testing.T) {
	var body []byte
	for _, r := range []string{"a", "bc", ""} {
		body = osiris.AppendEntry(body, osiris.SimpleEntry([]byte(r)))
	}
	e := osiris.Entry{SubBatch: true, Compression: osiris.CompressionNone, NumRecords: 3, UncompressedSize: uint32(len(body)), Body: body}
	b := osiris.AppendChunk(nil, osiris.ChunkSpec{Type: osiris.ChunkUser, ChunkID: 10, Entries: []osiris.Entry{e, osiris.SimpleEntry([]byte("x"))}})
	c, err := osiris.DecodeChunk(b, 0)
	if err != nil || !c.CRCMatch() || c.Header.NumEntries != 2 || c.Header.NumRecords != 4 {
		t.Fatalf("%+v %v", c.Header, err)
	}
	it := osiris.Entries(c.Data, 48)
	if !it.Next() {
		t.Fatal(it.Err())
	}
	got := it.Entry()
	if !got.SubBatch || got.NumRecords != 3 || got.Pos != 48 || got.Size() != int64(11+len(body)) {
		t.Fatalf("%+v", got)
	}
	var recs []string
	if err := osiris.SubBatchRecords(got.Body, got.Pos+11, func(i int, pos int64, r []byte) error {
		recs = append(recs, string(r))
		return nil
	}); err != nil || strings.Join(recs, ",") != "a,bc," {
		t.Fatalf("%q %v", recs, err)
	}
	if !it.Next() || it.Entry().SubBatch || string(it.Entry().Body) != "x" || it.Next() || it.Err() != nil {
		t.Fatal("second entry")
	}
}
