// Package osiris decodes and encodes the files of a RabbitMQ stream, as
// written by osiris (rabbitmq/osiris, src/osiris_log.erl): segment files
// (`OSIL` header, then chunks: a 48-byte header, an optional bloom filter,
// the data entries and the tracking trailer) and index files (`OSII`
// header, then one 29-byte record per chunk).
//
// The layouts, with the upstream lines they come from, are in
// docs/formats/osiris.md. Integers are big-endian. Decoders take bytes
// and the absolute offset of their first byte and return a
// *format.CorruptError naming the field and the offset; encoders
// (Append*) sit beside them. SegmentReader and IndexReader walk a file
// over an io.ReaderAt without holding more than one chunk. Nothing here
// opens a file.
package osiris

import (
	"encoding/binary"

	"github.com/storectl/storectl/internal/crc32x"
	"github.com/storectl/storectl/pkg/format"
)

// File headers (osiris.hrl v1.8.5 39-44; v1.3.1 osiris_log.erl defines
// the same values).
const (
	SegmentMagic    = "OSIL"
	IndexMagic      = "OSII"
	LogVersion      = 1
	IndexVersion    = 1
	FileHeaderSize  = 8
	ChunkHeaderSize = 48
	IndexRecordSize = 29
	// ChunkMagic and ChunkVersion are the first byte's two nibbles
	// (?MAGIC = 5, ?VERSION = 0: first byte 0x50).
	ChunkMagic   = 5
	ChunkVersion = 0
	// DefaultFilterSize is the bloom filter size osiris writes when the
	// stream filters (?DEFAULT_FILTER_SIZE).
	DefaultFilterSize = 16
	// DefaultMaxSegmentSize is osiris' default segment roll-over size
	// (?DEFAULT_MAX_SEGMENT_SIZE_B, 500 MB).
	DefaultMaxSegmentSize = 500 * 1000 * 1000
)

// ChunkType is byte 1 of a chunk header.
type ChunkType uint8

// Chunk types (?CHNK_USER, ?CHNK_TRK_DELTA, ?CHNK_TRK_SNAPSHOT).
const (
	ChunkUser             ChunkType = 0
	ChunkTrackingDelta    ChunkType = 1
	ChunkTrackingSnapshot ChunkType = 2
)

func (t ChunkType) String() string {
	switch t {
	case ChunkUser:
		return "user"
	case ChunkTrackingDelta:
		return "tracking-delta"
	case ChunkTrackingSnapshot:
		return "tracking-snapshot"
	}
	return "unknown"
}

var be = binary.BigEndian

// ChunkHeader is the 48-byte header of a chunk (make_chunk, v1.8.5
// osiris_log.erl 2361-2387; v1.3.1 2074-2110, where byte 44 is reserved
// and always 0).
type ChunkHeader struct {
	Type       ChunkType
	NumEntries uint16 // entries in the data (a sub-batch is one entry)
	NumRecords uint32 // offsets the chunk takes (messages)
	Timestamp  int64  // ms since the epoch
	Epoch      uint64
	ChunkID    uint64 // offset of the first record
	CRC        uint32 // CRC-32 (IEEE) of the data entries only
	DataSize   uint32
	// TrailerSize is the size of the tracking trailer after the data.
	TrailerSize uint32
	// FilterSize is the bloom filter's size (osiris >= 1.6; 0 before).
	FilterSize uint8
	// Reserved holds bytes 45-47, written as zero.
	Reserved [3]byte
}

// Size is the whole chunk's size: header, filter, data and trailer.
func (h ChunkHeader) Size() int64 {
	return ChunkHeaderSize + int64(h.FilterSize) + int64(h.DataSize) + int64(h.TrailerSize)
}

// DataOffset is where the data entries start, from the chunk's start.
func (h ChunkHeader) DataOffset() int64 { return ChunkHeaderSize + int64(h.FilterSize) }

// NextOffset is the first offset after the chunk.
func (h ChunkHeader) NextOffset() uint64 { return h.ChunkID + uint64(h.NumRecords) }

// DecodeChunkHeader decodes the chunk header at the start of b; off is
// the absolute offset of b[0]. It checks the magic and version nibbles
// and the chunk type, as osiris' readers match them.
func DecodeChunkHeader(b []byte, off int64) (ChunkHeader, error) {
	if len(b) < ChunkHeaderSize {
		return ChunkHeader{}, format.Corrupt(off, "chunk header", format.ErrShort)
	}
	if b[0]>>4 != ChunkMagic {
		return ChunkHeader{}, format.Corrupt(off, "magic", format.ErrMagic)
	}
	if b[0]&0x0f != ChunkVersion {
		return ChunkHeader{}, format.Corrupt(off, "version", format.ErrUnsupported)
	}
	h := ChunkHeader{
		Type:        ChunkType(b[1]),
		NumEntries:  be.Uint16(b[2:]),
		NumRecords:  be.Uint32(b[4:]),
		Timestamp:   int64(be.Uint64(b[8:])),
		Epoch:       be.Uint64(b[16:]),
		ChunkID:     be.Uint64(b[24:]),
		CRC:         be.Uint32(b[32:]),
		DataSize:    be.Uint32(b[36:]),
		TrailerSize: be.Uint32(b[40:]),
		FilterSize:  b[44],
		Reserved:    [3]byte{b[45], b[46], b[47]},
	}
	if h.Type > ChunkTrackingSnapshot {
		return ChunkHeader{}, format.Corrupt(off+1, "chunk type", format.ErrInvalid)
	}
	return h, nil
}

// AppendChunkHeader appends the 48-byte encoding of h.
func AppendChunkHeader(dst []byte, h ChunkHeader) []byte {
	dst = append(dst, ChunkMagic<<4|ChunkVersion, byte(h.Type))
	dst = be.AppendUint16(dst, h.NumEntries)
	dst = be.AppendUint32(dst, h.NumRecords)
	dst = be.AppendUint64(dst, uint64(h.Timestamp))
	dst = be.AppendUint64(dst, h.Epoch)
	dst = be.AppendUint64(dst, h.ChunkID)
	dst = be.AppendUint32(dst, h.CRC)
	dst = be.AppendUint32(dst, h.DataSize)
	dst = be.AppendUint32(dst, h.TrailerSize)
	return append(dst, h.FilterSize, h.Reserved[0], h.Reserved[1], h.Reserved[2])
}

// Chunk is one decoded chunk. Filter, Data and Trailer alias the input.
type Chunk struct {
	Header  ChunkHeader
	Pos     int64 // absolute offset of the header in its segment
	Filter  []byte
	Data    []byte
	Trailer []byte
}

// CRC is the CRC-32 of data as osiris computes it (erlang:crc32/1).
func CRC(data []byte) uint32 { return crc32x.ChecksumIEEE(data) }

// CRCMatch reports whether the data matches the header's CRC.
func (c *Chunk) CRCMatch() bool { return CRC(c.Data) == c.Header.CRC }

// End is the offset just past the chunk.
func (c *Chunk) End() int64 { return c.Pos + c.Header.Size() }

// DecodeChunk decodes the whole chunk at the start of b (off: absolute
// offset of b[0]). A chunk that runs past the end of b fails with
// ErrShort at the field that is cut. The CRC is not checked (CRCMatch).
func DecodeChunk(b []byte, off int64) (Chunk, error) {
	h, err := DecodeChunkHeader(b, off)
	if err != nil {
		return Chunk{}, err
	}
	c := Chunk{Header: h, Pos: off}
	p := int64(ChunkHeaderSize)
	take := func(n int64, field string) []byte {
		if err != nil {
			return nil
		}
		if n > int64(len(b))-p {
			err = format.Corrupt(off+p, field, format.ErrShort)
			return nil
		}
		s := b[p : p+n : p+n]
		p += n
		return s
	}
	c.Filter = take(int64(h.FilterSize), "filter")
	c.Data = take(int64(h.DataSize), "data")
	c.Trailer = take(int64(h.TrailerSize), "trailer")
	if err != nil {
		return Chunk{}, err
	}
	return c, nil
}

// ChunkSpec describes a chunk to encode: AppendChunk fills in the counts,
// sizes and CRC from the entries.
type ChunkSpec struct {
	Type      ChunkType
	Timestamp int64
	Epoch     uint64
	ChunkID   uint64
	Filter    []byte
	Entries   []Entry // encoded with AppendEntry
	Trailer   []byte
}

// AppendChunk appends a whole chunk: header, filter, entries, trailer,
// with the entry and record counts, sizes and data CRC osiris computes.
func AppendChunk(dst []byte, s ChunkSpec) []byte {
	start := len(dst)
	dst = append(dst, make([]byte, ChunkHeaderSize)...)
	dst = append(dst, s.Filter...)
	dataStart := len(dst)
	var records uint32
	for _, e := range s.Entries {
		dst = AppendEntry(dst, e)
		records += uint32(e.Records())
	}
	data := dst[dataStart:]
	h := ChunkHeader{Type: s.Type, NumEntries: uint16(len(s.Entries)), NumRecords: records,
		Timestamp: s.Timestamp, Epoch: s.Epoch, ChunkID: s.ChunkID, CRC: CRC(data),
		DataSize: uint32(len(data)), TrailerSize: uint32(len(s.Trailer)), FilterSize: uint8(len(s.Filter))}
	AppendChunkHeader(dst[start:start], h)
	return append(dst, s.Trailer...)
}

// AppendSegmentHeader appends "OSIL" and the log version.
func AppendSegmentHeader(dst []byte) []byte {
	return be.AppendUint32(append(dst, SegmentMagic...), LogVersion)
}

// AppendIndexHeader appends "OSII" and the index version.
func AppendIndexHeader(dst []byte) []byte {
	return be.AppendUint32(append(dst, IndexMagic...), IndexVersion)
}

// DecodeSegmentHeader checks a segment file's 8-byte header.
func DecodeSegmentHeader(b []byte, off int64) error {
	return fileHeader(b, off, SegmentMagic, LogVersion)
}

// DecodeIndexHeader checks an index file's 8-byte header.
func DecodeIndexHeader(b []byte, off int64) error {
	return fileHeader(b, off, IndexMagic, IndexVersion)
}

func fileHeader(b []byte, off int64, magic string, version uint32) error {
	if len(b) < FileHeaderSize {
		if n := min(len(b), 4); string(b[:n]) != magic[:n] {
			return format.Corrupt(off, "magic", format.ErrMagic)
		}
		return format.Corrupt(off, "file header", format.ErrShort)
	}
	if string(b[:4]) != magic {
		return format.Corrupt(off, "magic", format.ErrMagic)
	}
	if be.Uint32(b[4:]) != version {
		return format.Corrupt(off+4, "version", format.ErrUnsupported)
	}
	return nil
}
