package osiris_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"reflect"
	"testing"

	"github.com/storectl/storectl/pkg/format"
	"github.com/storectl/storectl/pkg/format/osiris"
)

// seedSegments adds the head of every real segment (4.0.5 and 3.10.8):
// the file header and the chunks that end within 8 KiB, whole and cut
// inside the last one. Small seeds keep the fuzzer's mutation and its
// minimizing of new inputs fast (whole segments of 64 KiB kept it
// minimizing for most of a run).
func seedSegments(f *testing.F) {
	segs, _ := realFiles(f)
	n := 0
	for _, p := range segs {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		sr, err := osiris.NewSegmentReader(bytes.NewReader(b), int64(len(b)))
		if err != nil {
			f.Fatal(err)
		}
		end := int64(osiris.FileHeaderSize)
		for sr.Next() && sr.Chunk().End() <= 8<<10 {
			end = sr.Chunk().End()
		}
		if end == osiris.FileHeaderSize {
			continue // the first chunk alone is larger
		}
		f.Add(b[:end])
		f.Add(b[:end-7])
		n++
	}
	if n == 0 {
		f.Fatal("no segment starts with a chunk under 8 KiB")
	}
}

func checkCorrupt(t *testing.T, err error, size int) {
	t.Helper()
	var ce *format.CorruptError
	if err != nil && errors.As(err, &ce) && (ce.Offset < 0 || ce.Offset > int64(size)) {
		t.Fatalf("offset %d outside the input (%d bytes): %v", ce.Offset, size, err)
	}
}

// FuzzSegment reads any bytes as a segment: no panic, every chunk it
// returns re-encodes to its bytes, and the walk ends at EOF or at an
// error inside the input.
func FuzzSegment(f *testing.F) {
	seedSegments(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		sr, err := osiris.NewSegmentReader(bytes.NewReader(b), int64(len(b)))
		if err != nil {
			checkCorrupt(t, err, len(b))
			return
		}
		sr.SetWindow(64)
		for sr.Next() {
			c := sr.Chunk()
			raw := b[c.Pos:c.End()]
			re := osiris.AppendChunkHeader(nil, c.Header)
			re = append(append(append(re, c.Filter...), c.Data...), c.Trailer...)
			if !bytes.Equal(re, raw) {
				t.Fatalf("chunk at %d re-encodes differently", c.Pos)
			}
			_ = c.CRCMatch()
			it := osiris.Entries(c.Data, c.Pos+c.Header.DataOffset())
			for it.Next() {
				e := it.Entry()
				if !bytes.Equal(osiris.AppendEntry(nil, e), b[e.Pos:e.Pos+e.Size()]) {
					t.Fatalf("entry at %d re-encodes differently", e.Pos)
				}
			}
			checkCorrupt(t, it.Err(), len(b))
			if len(c.Trailer) > 0 {
				_, err := osiris.DecodeTrailer(c.Trailer, c.End()-int64(len(c.Trailer)))
				checkCorrupt(t, err, len(b))
			}
		}
		checkCorrupt(t, sr.Err(), len(b))
		if sr.Err() == nil && sr.Pos() != int64(len(b)) {
			t.Fatalf("clean end at %d of %d", sr.Pos(), len(b))
		}
		if h, part := sr.Partial(); part != nil && sr.Pos()+int64(len(part)) != int64(len(b)) {
			t.Fatalf("partial chunk %v: %d bytes from %d of %d", h, len(part), sr.Pos(), len(b))
		}
	})
}

// FuzzIndex reads any bytes as an index.
func FuzzIndex(f *testing.F) {
	_, idxs := realFiles(f)
	for _, p := range idxs[:min(len(idxs), 8)] {
		b, _ := os.ReadFile(p)
		f.Add(b)
		f.Add(b[:len(b)-5])
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		x, err := osiris.NewIndexReader(bytes.NewReader(b), int64(len(b)))
		if err != nil {
			checkCorrupt(t, err, len(b))
			return
		}
		out := osiris.AppendIndexHeader(nil)
		for x.Next() {
			r := x.Record()
			out = osiris.AppendIndexRecord(out, r)
			if r.IsZero() != (r == osiris.IndexRecord{}) {
				t.Fatal("IsZero")
			}
		}
		checkCorrupt(t, x.Err(), len(b))
		if !bytes.HasPrefix(b, out) {
			t.Fatal("records re-encode differently")
		}
		if (x.Err() == nil) != ((len(b)-osiris.FileHeaderSize)%osiris.IndexRecordSize == 0) {
			t.Fatalf("err %v for %d bytes", x.Err(), len(b))
		}
	})
}

// FuzzEntries decodes any bytes as a chunk's data and as tracking.
func FuzzEntries(f *testing.F) {
	segs, _ := realFiles(f)
	for _, p := range segs[:min(len(segs), 4)] {
		b, _ := os.ReadFile(p)
		sr, err := osiris.NewSegmentReader(bytes.NewReader(b), int64(len(b)))
		if err != nil {
			f.Fatal(err)
		}
		for n := 0; sr.Next() && n < 20; n++ {
			c := sr.Chunk()
			f.Add(append([]byte(nil), c.Data...))
			if len(c.Trailer) > 0 {
				f.Add(append([]byte(nil), c.Trailer...))
			}
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		entriesSame(t, b)
		it := osiris.Entries(b, 100)
		for it.Next() {
			e := it.Entry()
			if e.Pos < 100 || e.Pos+e.Size() > 100+int64(len(b)) {
				t.Fatalf("entry %d+%d outside the data", e.Pos, e.Size())
			}
			if e.SubBatch && e.Compression == osiris.CompressionNone {
				_ = osiris.SubBatchRecords(e.Body, e.Pos+osiris.SubBatchEntryHeaderSize, func(int, int64, []byte) error { return nil })
			}
		}
		if it.Err() != nil && it.Consumed() > len(b) {
			t.Fatal("consumed past the data")
		}
		for _, snap := range []bool{false, true} {
			var ts []osiris.Tracking
			var err error
			if snap {
				ts, err = osiris.DecodeTrackingSnapshot(b, 0)
			} else {
				ts, err = osiris.DecodeTrailer(b, 0)
			}
			checkCorrupt(t, err, len(b))
			if err == nil {
				var re []byte
				for _, tr := range ts {
					re = osiris.AppendTracking(re, tr, snap)
				}
				if !bytes.Equal(re, b) {
					t.Fatalf("tracking (snapshot %v) re-encodes differently", snap)
				}
			}
		}
	})
}

// entriesSame checks that Entries yields what DecodeEntry decodes front
// to back (its fast path for simple entries included), and stops with
// its error.
func entriesSame(t *testing.T, b []byte) {
	t.Helper()
	it := osiris.Entries(b, 100)
	for p := 0; ; {
		if p >= len(b) {
			if it.Next() || it.Err() != nil {
				t.Fatalf("% x: an entry or error past the data", b)
			}
			return
		}
		e, err := osiris.DecodeEntry(b[p:], 100+int64(p))
		ok := it.Next()
		if err != nil {
			if ok || fmt.Sprint(it.Err()) != fmt.Sprint(err) || it.Consumed() != p {
				t.Fatalf("% x at %d: iterator %v %v (consumed %d), DecodeEntry %v", b, p, ok, it.Err(), it.Consumed(), err)
			}
			return
		}
		g := it.Entry()
		if !ok || !reflect.DeepEqual(g, e) || cap(g.Body) != cap(e.Body) || it.Consumed() != p+int(e.Size()) {
			t.Fatalf("% x at %d: iterator %v %+v, DecodeEntry %+v", b, p, ok, g, e)
		}
		p += int(e.Size())
	}
}

// TestEntriesSameAsDecodeEntry: simple and sub-batch entries, cut at
// every length and with every byte changed, iterate as DecodeEntry
// decodes them.
func TestEntriesSameAsDecodeEntry(t *testing.T) {
	var b []byte
	b = osiris.AppendEntry(b, osiris.SimpleEntry([]byte("hello")))
	b = osiris.AppendEntry(b, osiris.Entry{SubBatch: true, NumRecords: 2, UncompressedSize: 9, Body: []byte{0, 0, 0, 1, 'a', 0, 0, 0, 0}})
	b = osiris.AppendEntry(b, osiris.SimpleEntry(nil))
	b = osiris.AppendEntry(b, osiris.SimpleEntry(bytes.Repeat([]byte{0xee}, 300)))
	for n := 0; n <= len(b); n++ {
		entriesSame(t, b[:n])
	}
	c := make([]byte, len(b))
	for i := range b {
		for _, v := range []byte{0x00, 0x7f, 0x80, 0xff, b[i] + 1, b[i] - 1} {
			copy(c, b)
			c[i] = v
			entriesSame(t, c)
		}
	}
}
