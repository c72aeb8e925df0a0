package timer

import (
	"bytes"
	"encoding/binary"
	"testing"
)

// BenchmarkLogReaderNext: LogReader over 64 Ki units that recovery accepts
// (MB/s of timerlog).
func BenchmarkLogReaderNext(b *testing.B) {
	const n = 1 << 16
	buf := make([]byte, n*UnitSize)
	for i := 0; i < n; i++ {
		u := buf[i*UnitSize:]
		binary.BigEndian.PutUint32(u, UnitSize)
		binary.BigEndian.PutUint64(u[4:], uint64(i*UnitSize-UnitSize))
		binary.BigEndian.PutUint32(u[12:], 1)
		binary.BigEndian.PutUint64(u[16:], 1796163754000+uint64(i))
		binary.BigEndian.PutUint64(u[28:], uint64(i*1000))
		binary.BigEndian.PutUint32(u[36:], 1000)
	}
	b.SetBytes(int64(len(buf)))
	for range b.N {
		r := NewLogReader(bytes.NewReader(buf), int64(len(buf)), 0)
		k := 0
		for r.Next() {
			e := r.Entry()
			k += int(e.Unit.SizePy)
		}
		if k == 0 {
			b.Fatal()
		}
	}
}
