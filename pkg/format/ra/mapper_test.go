package ra_test

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"io"
	"math/rand/v2"
	"testing"

	"github.com/storectl/storectl/pkg/format/ra"
)

// inPlace is a ra.Mapper over b whose file now ends at end (a shrunk
// file when end < len(b)): Map hands out b's bytes themselves, ReadAt
// must not be called.
type inPlace struct {
	t    *testing.T
	b    []byte
	end  int64
	maps int
}

func (m *inPlace) ReadAt([]byte, int64) (int, error) {
	m.t.Fatal("ReadAt called on a Mapper")
	return 0, nil
}

func (m *inPlace) Map(off int64, n int) ([]byte, error) {
	m.maps++
	if off >= m.end {
		return nil, nil
	}
	return m.b[off:min(off+int64(n), m.end)], nil
}

// copied is the io.ReaderAt (pread) over the same bytes.
type copied struct {
	b   []byte
	end int64
}

func (c copied) ReadAt(p []byte, off int64) (int, error) {
	if off >= c.end {
		return 0, io.EOF
	}
	n := copy(p, c.b[off:c.end])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// walLog is everything a walk of a WAL says: each record's framing,
// checksum, last-record verdict, UId and data digest, the end, the error
// and the bytes read.
func walLog(r io.ReaderAt, size int64) string {
	var b bytes.Buffer
	rd := ra.NewWALReader(r, size)
	for rd.Next() {
		rec := rd.Record()
		// the digest before IsLast: through copies, a peek past the
		// window's end moves it over the record's bytes
		fmt.Fprintf(&b, "%d %d %d %d %q %v %x", rec.Offset, rec.Size(), rec.Index, rec.Term, rec.UID,
			rec.ChecksumOK(), sha256.Sum256(rec.Data))
		fmt.Fprintf(&b, " %v\n", rd.IsLast())
	}
	reason, off := rd.End()
	fmt.Fprintf(&b, "end %s@%d err %v read %d\n", reason, off, rd.Err(), rd.BytesRead())
	return b.String()
}

// TestWALReaderMapped: a WAL read in place through a Mapper walks the same
// records, ends the same way and counts the same bytes read as through
// copies (ReadAt), whole, cut anywhere (a torn record), and when the file
// shrank after its size was taken (the same short-read error). Records
// of up to 1.5 MiB straddle the 1 MiB windows.
func TestWALReaderMapped(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	b := ra.AppendWALHeader(nil)
	for i := 0; i < 3000; i++ {
		n := 10 + rng.IntN(3000)
		if i%700 == 5 {
			n = 1<<20 + rng.IntN(1<<19)
		}
		d := make([]byte, n)
		for j := range d {
			d[j] = byte(rng.Uint32())
		}
		rec := ra.WALRecord{WriterRef: uint32(i % 3), IsRef: i >= 3, Index: uint64(i), Term: 1, Data: d}
		if !rec.IsRef {
			rec.UID = []byte(fmt.Sprintf("UID%d", i))
		}
		rec.Checksum = rec.ComputeChecksum()
		if i == 1234 {
			rec.Checksum ^= 1
		}
		b = ra.AppendWALRecord(b, rec)
	}
	size := int64(len(b))
	ends := []int64{size, size - 1, size / 2, 5 + 7, 3}
	for k := 0; k < 20; k++ {
		ends = append(ends, rng.Int64N(size))
	}
	for _, end := range ends {
		// the file cut at end (its size says so) and the file shrunk to
		// end after a size of len(b) was taken
		for _, sz := range []int64{end, size} {
			want := walLog(copied{b, end}, sz)
			m := &inPlace{t: t, b: b, end: end}
			if got := walLog(m, sz); got != want {
				t.Fatalf("ends at %d, size %d: in place differs:\n%.2000s\nwant\n%.2000s", end, sz, got, want)
			}
			if end == size && m.maps == 0 {
				t.Fatal("no Map call")
			}
		}
	}
}

// TestSegmentReaderMapped: a segment's index and every slot's data read
// in place are those read through copies, with the same bytes read, also
// when the file shrank under the reader (the same errors).
func TestSegmentReaderMapped(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	h := ra.SegmentHeader{Version: 2, MaxCount: 4096}
	b := ra.AppendSegmentHeader(nil, h)
	off := uint64(h.DataStart())
	var table, data []byte
	for i := 0; i < 3000; i++ {
		d := make([]byte, 1+rng.IntN(2000))
		for j := range d {
			d[j] = byte(rng.Uint32())
		}
		table = ra.AppendSegmentSlot(table, ra.SegmentSlot{Index: uint64(i + 1), Term: 1, Offset: off, Length: uint32(len(d)), CRC: checksum(d)}, 2)
		off += uint64(len(d))
		data = append(data, d...)
	}
	b = append(b, table...)
	b = append(b, make([]byte, int(h.DataStart())-len(b))...)
	b = append(b, data...)
	size := int64(len(b))
	read := func(r io.ReaderAt, sz int64) string {
		var out bytes.Buffer
		s, err := ra.OpenSegment(r, sz)
		if err != nil {
			return fmt.Sprint("open: ", err)
		}
		for _, sl := range s.Index.Slots {
			d, err := s.Data(sl)
			fmt.Fprintf(&out, "%d %d %v %v\n", sl.Index, len(d), err, err == nil && sl.CRCOK(d))
		}
		fmt.Fprintf(&out, "read %d\n", s.BytesRead())
		return out.String()
	}
	for _, end := range []int64{size, size - 1, size / 2, int64(h.DataStart()) + 10, 100} {
		for _, sz := range []int64{end, size} {
			want := read(copied{b, end}, sz)
			if got := read(&inPlace{t: t, b: b, end: end}, sz); got != want {
				t.Fatalf("ends at %d, size %d: in place differs:\n%.2000s\nwant\n%.2000s", end, sz, got, want)
			}
		}
	}
}
