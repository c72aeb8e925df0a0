package ra

import (
	"io"

	"github.com/storectl/storectl/pkg/format"
)

// SegmentReader reads one segment file over an io.ReaderAt: the header
// and index table at open, then entry data on demand through a
// read-ahead window (reading the slots in table order reads the file
// front to back).
type SegmentReader struct {
	Header SegmentHeader
	Index  *SegmentIndex
	// MaxCount is the slot count the table was read with: Header.MaxCount,
	// or 65536 when the header says 0 but data follows (a
	// segment_max_entries of 65536 overflows the 16-bit field).
	MaxCount int
	// Overflow is set in that case.
	Overflow bool

	win  window
	size int64
}

// OpenSegment reads the header and the index table.
func OpenSegment(r io.ReaderAt, size int64) (*SegmentReader, error) {
	return OpenSegmentBuf(r, size, nil)
}

// OpenSegmentBuf is OpenSegment reading through buf (grown when too
// small) instead of a new window: a caller that reads many segments one
// after another passes each the Buf of the one before (a new 1 MiB window
// per segment had been a tenth of a quorum scan's CPU, zeroing and
// collecting it).
func OpenSegmentBuf(r io.ReaderAt, size int64, buf []byte) (*SegmentReader, error) {
	return openSegment(r, size, buf, nil)
}

// OpenSegmentReusing is OpenSegment reading through prev's window and
// decoding the index into prev's slots (prev nil: new ones): a caller that
// reads many segments one after another passes each the reader of the
// one before, which must not be used after (a new 4096-slot table per
// segment was a twentieth of a quorum scan's CPU, zeroing and collecting
// it).
func OpenSegmentReusing(r io.ReaderAt, size int64, prev *SegmentReader) (*SegmentReader, error) {
	if prev == nil {
		return openSegment(r, size, nil, nil)
	}
	var slots []SegmentSlot
	if prev.Index != nil {
		slots = prev.Index.Slots
	}
	return openSegment(r, size, prev.Buf(), slots)
}

func openSegment(r io.ReaderAt, size int64, buf []byte, slots []SegmentSlot) (*SegmentReader, error) {
	s := &SegmentReader{win: window{r: r, size: size, own: buf[:0]}, size: size}
	b, err := s.win.at(0, SegmentHeaderLen)
	if err != nil {
		return nil, err
	}
	if s.Header, err = DecodeSegmentHeader(b[:min(len(b), SegmentHeaderLen)]); err != nil {
		return nil, err
	}
	s.MaxCount = int(s.Header.MaxCount)
	if s.MaxCount == 0 && size > SegmentHeaderLen {
		s.MaxCount, s.Overflow = 1<<16, true
	}
	tableLen := int64(s.MaxCount) * int64(s.Header.SlotSize())
	tableLen = min(tableLen, size-SegmentHeaderLen)
	var table []byte
	if tableLen > 0 {
		if b, err = s.win.at(SegmentHeaderLen, int(tableLen)); err != nil {
			return nil, err
		}
		table = b[:tableLen]
	}
	s.Index = decodeSegmentIndex(s.Header, table, s.MaxCount, slots)
	return s, nil
}

// DataStart is where the entry data begins for the slot count read.
func (s *SegmentReader) DataStart() int64 {
	return SegmentHeaderLen + int64(s.MaxCount)*int64(s.Header.SlotSize())
}

// Size is the file size.
func (s *SegmentReader) Size() int64 { return s.size }

// Data returns the entry bytes of slot: ErrShort at "data" when they run
// past end of file (ra: ra_log_segment_unexpected_eof). Like ra, it
// reads wherever Offset points; the CRC is not checked here
// (SegmentSlot.CRCOK). The slice is valid until the next call.
func (s *SegmentReader) Data(slot SegmentSlot) ([]byte, error) {
	end := slot.Offset + uint64(slot.Length)
	if end < slot.Offset || end > uint64(s.size) {
		return nil, format.Corrupt(int64(min(slot.Offset, uint64(s.size))), "data", format.ErrShort)
	}
	b, err := s.win.at(int64(slot.Offset), int(slot.Length))
	if err != nil {
		return nil, err
	}
	return b[:slot.Length], nil
}

// Buf returns the reader's window buffer, for OpenSegmentBuf of the next
// segment (after which this reader must not be used).
func (s *SegmentReader) Buf() []byte { return s.win.own[:0] }

// BytesRead is how many bytes were read from the file.
func (s *SegmentReader) BytesRead() int64 { return s.win.read }
