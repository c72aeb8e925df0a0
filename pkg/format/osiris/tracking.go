package osiris

import (
	"github.com/storectl/storectl/pkg/format"
)

// TrackingType is the first byte of a tracking entry (osiris_tracking.erl
// v1.8.5 17-19, same in v1.3.1).
type TrackingType uint8

// Tracking types.
const (
	TrackingSequence  TrackingType = 0 // a writer's (publisher's) last sequence
	TrackingOffset    TrackingType = 1 // a consumer's stored offset
	TrackingTimestamp TrackingType = 2 // a timestamp (osiris >= 1.4)
)

func (t TrackingType) String() string {
	switch t {
	case TrackingSequence:
		return "sequence"
	case TrackingOffset:
		return "offset"
	case TrackingTimestamp:
		return "timestamp"
	}
	return "unknown"
}

// Tracking is one tracking entry. In a trailer (and a tracking-delta
// chunk) a sequence entry's chunk id is the chunk's own; in a
// tracking-snapshot chunk it is stored (ChunkID).
type Tracking struct {
	Type    TrackingType
	ID      []byte // writer or consumer reference, up to 255 bytes
	ChunkID uint64 // snapshot sequence entries only
	Value   uint64 // sequence, offset, or timestamp (two's complement)
}

// DecodeTrailer decodes a chunk trailer or a tracking-delta entry body:
// `Type:8, IdLen:8, Id, Value:64` repeated (osiris_tracking:flush/1 and
// parse_trailer/3).
func DecodeTrailer(b []byte, off int64) ([]Tracking, error) { return decodeTracking(b, off, false) }

// DecodeTrackingSnapshot decodes the body of a tracking-snapshot chunk's
// entry: like a trailer, but a sequence entry carries `ChId:64, Seq:64`
// (osiris_tracking:snapshot/3 and parse_snapshot/2).
func DecodeTrackingSnapshot(b []byte, off int64) ([]Tracking, error) {
	return decodeTracking(b, off, true)
}

func decodeTracking(b []byte, off int64, snapshot bool) ([]Tracking, error) {
	var out []Tracking
	c := format.NewCursor(b)
	for c.Remaining() > 0 && !c.Failed() {
		start := c.Off
		t := Tracking{Type: TrackingType(c.U8("tracking type"))}
		if t.Type > TrackingTimestamp {
			c.FailAt(start, "tracking type", format.ErrInvalid)
			break
		}
		t.ID = c.Take("tracking id", int(c.U8("tracking id length")))
		if snapshot && t.Type == TrackingSequence {
			t.ChunkID = c.U64("tracking chunk id")
		}
		t.Value = c.U64("tracking value")
		if !c.Failed() {
			out = append(out, t)
		}
	}
	if err := c.Err(off); err != nil {
		return out, err
	}
	return out, nil
}

// AppendTracking appends t in the trailer format, or with snapshot the
// tracking-snapshot format.
func AppendTracking(dst []byte, t Tracking, snapshot bool) []byte {
	dst = append(dst, byte(t.Type), byte(len(t.ID)))
	dst = append(dst, t.ID...)
	if snapshot && t.Type == TrackingSequence {
		dst = be.AppendUint64(dst, t.ChunkID)
	}
	return be.AppendUint64(dst, t.Value)
}
