package rocketmq_test

import (
	"fmt"
	"net/netip"
	"testing"

	gen "github.com/storectl/storectl/internal/gen/rocketmq"
	rmq "github.com/storectl/storectl/pkg/format/rocketmq"
)

// benchRecords is 8 MiB of back-to-back records with the generator's mix
// of body sizes (0-20000), keys, tags and IPv4/IPv6 hosts.
func benchRecords(b *testing.B) []byte {
	b.Helper()
	sizes := []int{0, 1, 7, 64, 100, 255, 256, 1000, 1500, 3000, 4096, 8000, 12000, 20000}
	body := make([]byte, 20000)
	for i := range body {
		body[i] = byte(i * 7)
	}
	var out []byte
	for i := 0; len(out) < 8<<20; i++ {
		m := &gen.Msg{Topic: "TopicA", QueueID: int32(i % 4), QueueOffset: int64(i), PhysicalOffset: int64(len(out)),
			BornTimestamp: 1700000000000, StoreTimestamp: 1700000000001,
			BornHost:  rmq.Host{Addr: netip.AddrFrom4([4]byte{10, 1, 2, 3}), Port: 50000},
			StoreHost: rmq.Host{Addr: netip.MustParseAddr("2001:db8::1"), Port: 10911},
			Body:      body[:sizes[i%len(sizes)]],
			Properties: gen.Props(rmq.PropUniqKey, fmt.Sprintf("7F00000100002A9F%016X", i),
				rmq.PropTags, "TagA", rmq.PropKeys, fmt.Sprintf("k-%d k2-%d", i, i))}
		out = gen.AppendMessage(out, m)
	}
	return out
}

// BenchmarkDecodeMessage decodes every record's frame and fields (no CRC).
func BenchmarkDecodeMessage(b *testing.B) {
	data := benchRecords(b)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		for off := 0; off < len(data); {
			m, err := rmq.DecodeMessage(data[off:], int64(off), 0)
			if err != nil {
				b.Fatal(err)
			}
			off += int(m.TotalSize)
		}
	}
}

// BenchmarkDecodeVerifyMessage is DecodeMessage plus Verify: the body CRC
// and the property CRC lookup of every record, what a scan does per record.
func BenchmarkDecodeVerifyMessage(b *testing.B) {
	data := benchRecords(b)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		for off := 0; off < len(data); {
			m, err := rmq.DecodeMessage(data[off:], int64(off), 0)
			if err == nil {
				err = m.Verify()
			}
			if err != nil {
				b.Fatal(err)
			}
			off += int(m.TotalSize)
		}
	}
}

// BenchmarkCRC32 is the masked IEEE CRC of 1 MiB (hash/crc32 uses the
// CPU's carry-less multiply instructions).
func BenchmarkCRC32(b *testing.B) {
	buf := make([]byte, 1<<20)
	for i := range buf {
		buf[i] = byte(i * 13)
	}
	b.SetBytes(int64(len(buf)))
	for b.Loop() {
		_ = rmq.CRC32(buf)
	}
}

// BenchmarkIndexKeyHash hashes index keys the way rebuild-index and
// verify do: the topic + "#" prefix once, continued over each key (a
// 32-digit UNIQ_KEY and a short KEYS value). Bytes are key bytes.
func BenchmarkIndexKeyHash(b *testing.B) {
	keys := make([][]byte, 1024)
	n := 0
	for i := range keys {
		if i%2 == 0 {
			keys[i] = fmt.Appendf(nil, "7F00000100002A9F%016X", i)
		} else {
			keys[i] = fmt.Appendf(nil, "order-%d", i)
		}
		n += len(keys[i])
	}
	prefix := rmq.JavaHashCodeFrom(rmq.JavaHashCode([]byte("TopicLongName-V2-xxxxxxxx")), []byte{'#'})
	b.SetBytes(int64(n))
	var sink int32
	for b.Loop() {
		for _, k := range keys {
			sink += rmq.IndexHashOf(rmq.JavaHashCodeFrom(prefix, k))
		}
	}
	_ = sink
}
