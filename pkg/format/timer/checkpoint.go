package timer

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"sort"

	"github.com/storectl/storectl/pkg/format"
)

// Checkpoint sizes (TimerCheckpoint.java).
const (
	// CheckpointFileSize is the mapped length of config/timercheck (one page).
	CheckpointFileSize = 4096
	// CheckpointMinSize is the four longs every version writes.
	CheckpointMinSize = 32
	// CheckpointSize adds the data version (stateVersion, timestamp, counter).
	CheckpointSize = 56
)

// Checkpoint is config/timercheck (TimerCheckpoint.flush / decode).
type Checkpoint struct {
	LastReadTimeMs         int64 // where the dequeue resumes
	LastTimerLogFlushPos   int64 // timerlog offset flushed; recovery rescans from one file before it
	LastTimerQueueOffset   int64 // next offset of rmq_sys_wheel_timer/0 to enqueue
	MasterTimerQueueOffset int64 // upper bound for the enqueue offset
	StateVersion           int64
	Timestamp              int64
	Counter                int64
	HasVersion             bool // the three data version longs were present
}

// DecodeCheckpoint decodes b as TimerCheckpoint.decode does: four longs,
// then the data version when at least 56 bytes are there.
func DecodeCheckpoint(b []byte, off int64) (Checkpoint, error) {
	c := format.Cursor{B: b}
	cp := Checkpoint{
		LastReadTimeMs:         int64(c.U64("lastReadTimeMs")),
		LastTimerLogFlushPos:   int64(c.U64("lastTimerLogFlushPos")),
		LastTimerQueueOffset:   int64(c.U64("lastTimerQueueOffset")),
		MasterTimerQueueOffset: int64(c.U64("masterTimerQueueOffset")),
	}
	if c.Failed() || len(b) < CheckpointSize {
		return cp, c.Err(off)
	}
	cp.StateVersion = int64(c.U64("stateVersion"))
	cp.Timestamp = int64(c.U64("timestamp"))
	cp.Counter = int64(c.U64("counter"))
	cp.HasVersion = true
	return cp, c.Err(off)
}

// AppendCheckpoint appends the 56-byte encoding of cp (TimerCheckpoint.encode).
func AppendCheckpoint(dst []byte, cp Checkpoint) []byte {
	for _, v := range []int64{cp.LastReadTimeMs, cp.LastTimerLogFlushPos, cp.LastTimerQueueOffset,
		cp.MasterTimerQueueOffset, cp.StateVersion, cp.Timestamp, cp.Counter} {
		dst = binary.BigEndian.AppendUint64(dst, uint64(v))
	}
	return dst
}

// DataVersion is RocketMQ's DataVersion as fastjson writes it.
type DataVersion struct {
	Counter      int64 `json:"counter"`
	StateVersion int64 `json:"stateVersion"`
	Timestamp    int64 `json:"timestamp"`
}

// TimingCount is one topic's entry of the timer metrics.
type TimingCount struct {
	Count     int64 `json:"count"`
	TimeStamp int64 `json:"timeStamp"`
}

// Metrics is config/timermetrics (TimerMetrics.persist): the pending timer
// messages per real topic.
type Metrics struct {
	DataVersion DataVersion            `json:"dataVersion"`
	TimingCount map[string]TimingCount `json:"timingCount"`
}

// Topics returns the topics of m in name order.
func (m *Metrics) Topics() []string {
	out := make([]string, 0, len(m.TimingCount))
	for t := range m.TimingCount {
		out = append(out, t)
	}
	sort.Strings(out)
	return out
}

// DecodeMetrics parses the timermetrics JSON. A syntax error is a
// *format.CorruptError at the byte where parsing failed.
func DecodeMetrics(b []byte) (Metrics, error) {
	var m Metrics
	if err := json.Unmarshal(b, &m); err != nil {
		return Metrics{}, jsonCorrupt(err, len(b))
	}
	return m, nil
}

// AppendMetrics appends m as JSON (encoding/json's map order: sorted keys).
func AppendMetrics(dst []byte, m Metrics) []byte {
	b, _ := json.Marshal(m) // plain structs and maps of them: cannot fail
	return append(dst, b...)
}

// jsonCorrupt turns an encoding/json error into a *format.CorruptError.
func jsonCorrupt(err error, n int) error {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		return format.Corrupt(se.Offset, "json", fmt.Errorf("%w: %v", format.ErrInvalid, err))
	case errors.As(err, &te):
		return format.Corrupt(te.Offset, te.Field, fmt.Errorf("%w: %v", format.ErrInvalid, err))
	}
	return format.Corrupt(int64(n), "json", fmt.Errorf("%w: %v", format.ErrShort, err))
}
