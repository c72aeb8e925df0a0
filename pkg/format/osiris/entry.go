package osiris

import (
	"github.com/storectl/storectl/pkg/format"
)

// Entry header sizes (osiris_log.erl v1.8.5 doc comment 200-290,
// process_entry0 2343-2357).
const (
	SimpleEntryHeaderSize   = 4  // 0:1, Len:31
	SubBatchEntryHeaderSize = 11 // 1:1, CompType:3, 0:4, NumRecords:16, UncompLen:32, Len:32
	// MaxSimpleEntrySize is the largest body a simple entry can hold.
	MaxSimpleEntrySize = 1<<31 - 1
)

// Compression types of a sub-batch entry, as the stream protocol clients
// define them (osiris stores them without interpreting them).
const (
	CompressionNone   = 0
	CompressionGzip   = 1
	CompressionSnappy = 2
	CompressionLZ4    = 3
	CompressionZstd   = 4
)

// Entry is one data entry of a chunk: a simple entry holds one record
// (its Body); a sub-batch entry holds NumRecords records, compressed
// with Compression, in Body.
type Entry struct {
	Pos              int64 // absolute offset of the entry's first byte
	SubBatch         bool
	Compression      uint8  // sub-batch: 3-bit compression type
	Reserved         uint8  // sub-batch: the 4 reserved bits (0)
	NumRecords       uint16 // sub-batch: records inside
	UncompressedSize uint32 // sub-batch: Body's size once decompressed
	Body             []byte // aliases the input
}

// Records is how many offsets the entry takes.
func (e Entry) Records() int {
	if e.SubBatch {
		return int(e.NumRecords)
	}
	return 1
}

// HeaderSize is the size of the entry's header.
func (e Entry) HeaderSize() int {
	if e.SubBatch {
		return SubBatchEntryHeaderSize
	}
	return SimpleEntryHeaderSize
}

// Size is the whole entry's size, header included.
func (e Entry) Size() int64 { return int64(e.HeaderSize()) + int64(len(e.Body)) }

// SimpleEntry builds a simple entry holding body.
func SimpleEntry(body []byte) Entry { return Entry{Body: body} }

// DecodeEntry decodes the entry at the start of b (off: absolute offset
// of b[0]).
func DecodeEntry(b []byte, off int64) (Entry, error) {
	if len(b) < 1 {
		return Entry{}, format.Corrupt(off, "entry header", format.ErrShort)
	}
	e := Entry{Pos: off}
	var n uint32
	hs := SimpleEntryHeaderSize
	if b[0]&0x80 == 0 {
		if len(b) < SimpleEntryHeaderSize {
			return Entry{}, format.Corrupt(off, "entry header", format.ErrShort)
		}
		n = be.Uint32(b) & 0x7fffffff
	} else {
		if len(b) < SubBatchEntryHeaderSize {
			return Entry{}, format.Corrupt(off, "sub-batch header", format.ErrShort)
		}
		e.SubBatch = true
		e.Compression = b[0] >> 4 & 0x7
		e.Reserved = b[0] & 0x0f
		e.NumRecords = be.Uint16(b[1:])
		e.UncompressedSize = be.Uint32(b[3:])
		n = be.Uint32(b[7:])
		hs = SubBatchEntryHeaderSize
	}
	if int64(n) > int64(len(b)-hs) {
		return Entry{}, format.Corrupt(off+int64(hs), "entry body", format.ErrShort)
	}
	e.Body = b[hs : hs+int(n) : hs+int(n)]
	return e, nil
}

// AppendEntry appends the encoding of e (a simple entry when !SubBatch).
func AppendEntry(dst []byte, e Entry) []byte {
	if !e.SubBatch {
		dst = be.AppendUint32(dst, uint32(len(e.Body))&0x7fffffff)
		return append(dst, e.Body...)
	}
	dst = append(dst, 0x80|(e.Compression&0x7)<<4|e.Reserved&0x0f)
	dst = be.AppendUint16(dst, e.NumRecords)
	dst = be.AppendUint32(dst, e.UncompressedSize)
	dst = be.AppendUint32(dst, uint32(len(e.Body)))
	return append(dst, e.Body...)
}

// Entries iterates over the entries of a chunk's data. Use it as
//
//	it := osiris.Entries(c.Data, dataPos)
//	for it.Next() { e := it.Entry() ... }
//	if err := it.Err(); err != nil { ... }
//
// On data cut short, Next stops at the first entry that is not whole
// and Err is ErrShort at it: the entries before it are whole.
type EntryIter struct {
	data []byte
	off  int64
	p    int
	e    Entry
	err  error
}

// Entries returns an iterator over data; off is the absolute offset of
// data[0].
func Entries(data []byte, off int64) EntryIter { return EntryIter{data: data, off: off} }

// Next decodes the next entry; it returns false at the end or on error.
func (it *EntryIter) Next() bool {
	if it.err != nil || it.p >= len(it.data) {
		return false
	}
	// A whole simple entry (most of them) without DecodeEntry's copies.
	if b := it.data[it.p:]; len(b) >= SimpleEntryHeaderSize && b[0]&0x80 == 0 {
		if n := int(be.Uint32(b) & 0x7fffffff); n <= len(b)-SimpleEntryHeaderSize {
			it.e = Entry{Pos: it.off + int64(it.p), Body: b[SimpleEntryHeaderSize : SimpleEntryHeaderSize+n : SimpleEntryHeaderSize+n]}
			it.p += SimpleEntryHeaderSize + n
			return true
		}
	}
	e, err := DecodeEntry(it.data[it.p:], it.off+int64(it.p))
	if err != nil {
		it.err = err
		return false
	}
	it.e = e
	it.p += int(e.Size())
	return true
}

// Entry is the entry Next decoded.
func (it *EntryIter) Entry() Entry { return it.e }

// Err is the error that stopped the iteration, if any.
func (it *EntryIter) Err() error { return it.err }

// Consumed is how many bytes of data the whole entries took.
func (it *EntryIter) Consumed() int { return it.p }

// SubBatchRecords calls fn for each record of an uncompressed sub-batch
// body (records are `0:1, Len:31, Data`, parse_subbatch v1.8.5
// 1795-1803); off is the absolute offset of body[0]. Compressed bodies
// are opaque to osiris and to this package.
func SubBatchRecords(body []byte, off int64, fn func(i int, pos int64, rec []byte) error) error {
	for p, i := 0, 0; p < len(body); i++ {
		if len(body)-p < 4 {
			return format.Corrupt(off+int64(p), "sub-batch record", format.ErrShort)
		}
		if body[p]&0x80 != 0 {
			return format.Corrupt(off+int64(p), "sub-batch record", format.ErrInvalid)
		}
		n := int64(be.Uint32(body[p:]) & 0x7fffffff)
		if n > int64(len(body)-p-4) {
			return format.Corrupt(off+int64(p)+4, "sub-batch record", format.ErrShort)
		}
		if err := fn(i, off+int64(p), body[p+4:p+4+int(n)]); err != nil {
			return err
		}
		p += 4 + int(n)
	}
	return nil
}
