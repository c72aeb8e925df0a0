package rabbitmq

import (
	"encoding/binary"
	"testing"
)

// FuzzPredictMisread: for any file bytes and a record position in it,
// PredictMisread never panics, and a prediction is a frame 1-7 zero bytes
// before the record, of Size >= 16, whose marker byte is 0xFF: exactly a
// frame the generation-2 scanner's clause A accepts.
func FuzzPredictMisread(f *testing.F) {
	rec := make([]byte, 40)
	binary.BigEndian.PutUint64(rec[3:], 0x1400_0000_0000) // a record after 3 zero bytes
	f.Add(rec, uint16(3), uint32(0x1400+9))
	f.Add([]byte{}, uint16(0), uint32(0))
	f.Fuzz(func(t *testing.T, b []byte, at uint16, size uint32) {
		off := int64(at)
		if off > int64(len(b)) {
			off = int64(len(b))
		}
		c, total, ok := PredictMisread(b, off, int64(size)+RDQOverhead)
		if !ok {
			return
		}
		j := off - c
		if j < 1 || j > 7 || total-RDQOverhead < RDQMinSize {
			t.Fatalf("candidate at %d (record at %d), total %d", c, off, total)
		}
		for p := c; p < off; p++ {
			if b[p] != 0 {
				t.Fatalf("non-zero byte at %d between candidate and record", p)
			}
		}
		if end := c + total - 1; end >= int64(len(b)) || b[end] != RDQWriteOK {
			t.Fatalf("candidate %d+%d has no 0xFF marker", c, total)
		}
	})
}
