package rocketmq_test

import (
	"encoding/binary"
	"testing"

	rmq "github.com/storectl/storectl/pkg/format/rocketmq"
)

// BenchmarkDecodeCQUnit decodes a consume queue file of the broker's
// default size (300,000 units, 6,000,000 bytes), every unit filled.
func BenchmarkDecodeCQUnit(b *testing.B) {
	var data []byte
	for i := range int64(rmq.DefaultCQFileSize / rmq.CQUnitSize) {
		data = rmq.AppendCQUnit(data, rmq.CQUnit{CommitLogOffset: i * 4096, Size: 4000 + int32(i%97), TagsCode: i * 31})
	}
	benchDecodeAll(b, data, rmq.CQUnitSize, rmq.DecodeCQUnit, func(u rmq.CQUnit) int64 { return u.CommitLogOffset })
}

// BenchmarkDecodeIndexEntry decodes 1,000,000 index file entries (20 MB,
// a twentieth of a default index file's entry area).
func BenchmarkDecodeIndexEntry(b *testing.B) {
	data := make([]byte, 1_000_000*rmq.IndexEntrySize)
	for i := 0; i < len(data); i += rmq.IndexEntrySize {
		binary.BigEndian.PutUint32(data[i:], uint32(i*7))
		binary.BigEndian.PutUint64(data[i+4:], uint64(i)*4096)
		binary.BigEndian.PutUint32(data[i+12:], uint32(i%3600))
		binary.BigEndian.PutUint32(data[i+16:], uint32(i/rmq.IndexEntrySize))
	}
	benchDecodeAll(b, data, rmq.IndexEntrySize, rmq.DecodeIndexEntry, func(e rmq.IndexEntry) int64 { return e.PhyOffset })
}

// benchDecodeAll decodes data as back-to-back size-byte items; offset
// sums what each decoded item says, so the work is not optimised away.
func benchDecodeAll[T any](b *testing.B, data []byte, size int, decode func([]byte, int64) (T, error), offset func(T) int64) {
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		var sum int64
		for off := 0; off < len(data); off += size {
			v, err := decode(data[off:], int64(off))
			if err != nil {
				b.Fatal(err)
			}
			sum += offset(v)
		}
		if sum == 0 {
			b.Fatal("nothing decoded")
		}
	}
}
