package osiris

import (
	"errors"
	"io"

	"github.com/storectl/storectl/pkg/format"
)

// DefaultWindow is how much of a segment SegmentReader reads at once:
// large enough that small chunks cost no read each, small enough to stay
// in the CPU cache for the CRC pass.
const DefaultWindow = 512 << 10

// SegmentReader walks the chunks of a segment file front to back over an
// io.ReaderAt, in the style of archive/zip's Reader: Next decodes the
// next chunk into a window it reuses, so memory is one window or the
// largest chunk, whatever the file's size.
//
//	sr, err := osiris.NewSegmentReader(f, size)
//	for sr.Next() { c := sr.Chunk(); ... }
//	if err := sr.Err(); err != nil { ... }  // *format.CorruptError
//
// A chunk that runs past the end of the file (a torn tail) stops the walk
// with ErrShort; Partial returns what of it is there.
type SegmentReader struct {
	r      io.ReaderAt
	size   int64
	pos    int64 // next chunk
	window int

	buf      []byte
	bufStart int64
	chunk    Chunk
	err      error

	// partial: the torn chunk's header (when whole) and its bytes.
	partHeader *ChunkHeader
	partBytes  []byte
	// Read counts the bytes read from r (bytes scanned).
	Read int64
}

// NewSegmentReader checks the segment header and positions the reader at
// the first chunk. A file too short for a header, or with another magic,
// is a *format.CorruptError.
func NewSegmentReader(r io.ReaderAt, size int64) (*SegmentReader, error) {
	s := SegmentChunks(r, size)
	var hdr [FileHeaderSize]byte
	n, err := r.ReadAt(hdr[:min(size, FileHeaderSize)], 0)
	s.Read += int64(n)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	if err := DecodeSegmentHeader(hdr[:n], 0); err != nil {
		return nil, err
	}
	return s, nil
}

// Slicer is an io.ReaderAt over memory (a mapped file): Slice returns
// its bytes [off, off+n) without a copy, valid as long as the Slicer is.
// read says how many of those bytes, at the end, a window read would have
// had to read (SegmentReader already had the rest): what a wrapper that
// counts the bytes read counts. SegmentReader reads through Slice when
// its io.ReaderAt has it: the same windows, the same Read, no copy.
type Slicer interface {
	Slice(off int64, n, read int) ([]byte, error)
}

// SegmentChunks returns a reader positioned at the first chunk without
// checking the file header: osiris itself never checks it when it reads
// (only its dump functions do), so chunks after a damaged header are
// still the broker's data.
func SegmentChunks(r io.ReaderAt, size int64) *SegmentReader {
	return &SegmentReader{r: r, size: size, pos: FileHeaderSize, window: DefaultWindow}
}

// SetWindow sets how many bytes one read takes (at least a chunk header).
func (s *SegmentReader) SetWindow(n int) { s.window = max(n, ChunkHeaderSize) }

// Size is the file's size.
func (s *SegmentReader) Size() int64 { return s.size }

// Pos is the offset of the next chunk to read (after a failure: of the
// chunk that failed).
func (s *SegmentReader) Pos() int64 { return s.pos }

// SeekChunk makes Next read the chunk at pos (e.g. the next position an index
// knows of, past a damaged chunk) and clears a previous error.
func (s *SegmentReader) SeekChunk(pos int64) {
	s.pos, s.err, s.partHeader, s.partBytes = pos, nil, nil, nil
}

// Chunk is the chunk Next decoded; its slices are valid until the next
// call of Next or SeekChunk.
func (s *SegmentReader) Chunk() *Chunk { return &s.chunk }

// Err is the error that stopped Next: nil at a clean end of file, a
// *format.CorruptError for a bad or torn chunk, or an I/O error.
func (s *SegmentReader) Err() error { return s.err }

// Partial returns, after Next stopped on a chunk cut short by the end of
// the file, that chunk's header (nil when the header itself is cut) and
// the bytes from its start to the end of the file.
func (s *SegmentReader) Partial() (*ChunkHeader, []byte) { return s.partHeader, s.partBytes }

// view returns the bytes [off, off+n), reading a new window when needed.
func (s *SegmentReader) view(off, n int64) ([]byte, error) {
	if off >= s.bufStart && off+n <= s.bufStart+int64(len(s.buf)) {
		return s.buf[off-s.bufStart : off-s.bufStart+n], nil
	}
	want := max(n, int64(s.window))
	want = min(want, s.size-off)
	if want < n {
		return nil, io.ErrUnexpectedEOF
	}
	// Bytes of the window at and after off are kept, not read again.
	var keep int64
	if off >= s.bufStart && off < s.bufStart+int64(len(s.buf)) {
		keep = s.bufStart + int64(len(s.buf)) - off
	}
	if sl, ok := s.r.(Slicer); ok {
		b, err := sl.Slice(off, int(want), int(want-keep))
		if err != nil {
			s.buf = s.buf[:0]
			return nil, err
		}
		s.Read += want - keep
		s.buf, s.bufStart = b, off
		return b[:n], nil
	}
	if int64(cap(s.buf)) < want || int64(cap(s.buf)) > 4*max(int64(s.window), want) {
		nb := make([]byte, want)
		copy(nb, s.buf[len(s.buf)-int(keep):])
		s.buf = nb
	} else {
		copy(s.buf[:keep], s.buf[len(s.buf)-int(keep):])
	}
	b := s.buf[:want]
	got, err := s.r.ReadAt(b[keep:], off+keep)
	s.Read += int64(got)
	got += int(keep)
	if int64(got) < want {
		s.buf = s.buf[:0]
		if err == nil || errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	s.buf, s.bufStart = b, off
	return b[:n], nil
}

// Next decodes the next chunk. It returns false at the end of the file or
// when a chunk can't be decoded (then Err says why).
func (s *SegmentReader) Next() bool {
	if s.err != nil || s.pos >= s.size {
		return false
	}
	left := s.size - s.pos
	if left < ChunkHeaderSize {
		b, err := s.view(s.pos, left)
		if err != nil {
			s.err = err
			return false
		}
		s.partBytes = b
		// a cut header still shows its magic
		if b[0]>>4 != ChunkMagic {
			s.err = format.Corrupt(s.pos, "magic", format.ErrMagic)
		} else {
			s.err = format.Corrupt(s.pos, "chunk header", format.ErrShort)
		}
		return false
	}
	hb, err := s.view(s.pos, ChunkHeaderSize)
	if err != nil {
		s.err = err
		return false
	}
	h, err := DecodeChunkHeader(hb, s.pos)
	if err != nil {
		s.err = err
		return false
	}
	n := h.Size()
	if n > left {
		b, err := s.view(s.pos, left)
		if err != nil {
			s.err = err
			return false
		}
		s.partHeader, s.partBytes = &h, b
		field, at := "trailer", ChunkHeaderSize+int64(h.FilterSize)+int64(h.DataSize)
		switch {
		case left < h.DataOffset():
			field, at = "filter", ChunkHeaderSize
		case left < h.DataOffset()+int64(h.DataSize):
			field, at = "data", h.DataOffset()
		}
		s.err = format.Corrupt(s.pos+at, field, format.ErrShort)
		return false
	}
	b, err := s.view(s.pos, n)
	if err != nil {
		s.err = err
		return false
	}
	c, err := DecodeChunk(b, s.pos)
	if err != nil {
		s.err = err
		return false
	}
	s.chunk = c
	s.pos += n
	return true
}

// IndexReader walks the records of an index file over an io.ReaderAt.
type IndexReader struct {
	r     io.ReaderAt
	size  int64
	pos   int64
	buf   []byte
	bufAt int64
	rec   IndexRecord
	err   error
	// Read counts the bytes read from r.
	Read int64
}

// NewIndexReader checks the index header and positions the reader at the
// first record.
func NewIndexReader(r io.ReaderAt, size int64) (*IndexReader, error) {
	x := IndexRecords(r, size)
	var hdr [FileHeaderSize]byte
	n, err := r.ReadAt(hdr[:min(size, FileHeaderSize)], 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	if err := DecodeIndexHeader(hdr[:n], 0); err != nil {
		return nil, err
	}
	x.Read = int64(n)
	return x, nil
}

// IndexRecords returns a reader positioned at the first record without
// checking the file header (osiris never checks it).
func IndexRecords(r io.ReaderAt, size int64) *IndexReader {
	return &IndexReader{r: r, size: size, pos: FileHeaderSize}
}

// Pos is the offset of the record Next returned last (or of the cut
// record after a failure).
func (x *IndexReader) Pos() int64 { return x.pos - IndexRecordSize }

// Record is the record Next decoded.
func (x *IndexReader) Record() IndexRecord { return x.rec }

// Err is nil at a clean end, ErrShort for a cut last record, or an I/O error.
func (x *IndexReader) Err() error { return x.err }

// Next decodes the next record.
func (x *IndexReader) Next() bool {
	if x.err != nil || x.pos >= x.size {
		return false
	}
	if x.size-x.pos < IndexRecordSize {
		x.err = format.Corrupt(x.pos, "index record", format.ErrShort)
		x.pos += IndexRecordSize
		return false
	}
	if x.pos < x.bufAt || x.pos+IndexRecordSize > x.bufAt+int64(len(x.buf)) {
		n := min(int64(4096*IndexRecordSize), (x.size-x.pos)/IndexRecordSize*IndexRecordSize)
		if int64(cap(x.buf)) < n {
			x.buf = make([]byte, n)
		}
		b := x.buf[:n]
		got, err := x.r.ReadAt(b, x.pos)
		x.Read += int64(got)
		if int64(got) < n {
			if err == nil || errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			x.err = err
			x.buf = x.buf[:0]
			return false
		}
		x.buf, x.bufAt = b, x.pos
	}
	r, err := DecodeIndexRecord(x.buf[x.pos-x.bufAt:], x.pos)
	if err != nil {
		x.err = err
		return false
	}
	x.rec = r
	x.pos += IndexRecordSize
	return true
}
