package rocketmq

import (
	"encoding/binary"

	"github.com/storectl/storectl/pkg/format"
)

// CheckpointSize is the part of the checkpoint file that carries data:
// five longs (docs/formats/rocketmq.md §6.1). The file itself is one
// 4096-byte page.
const CheckpointSize = 40

// CheckpointTimestampsOffset and CheckpointTimestampsSize locate
// logicsMsgTimestamp and indexMsgTimestamp, the two fields that follow
// from the consume queues and index files (and that rebuild-index
// rewrites after regenerating them).
const (
	CheckpointTimestampsOffset = 8
	CheckpointTimestampsSize   = 16
)

// Checkpoint is the StoreCheckpoint file.
type Checkpoint struct {
	PhysicMsgTimestamp  int64
	LogicsMsgTimestamp  int64
	IndexMsgTimestamp   int64
	MasterFlushedOffset int64 // 5.0+; 0 in 4.x files
	ConfirmPhyOffset    int64 // 5.1.1+; 0 in older files
}

// MinTimestamp is StoreCheckpoint.getMinTimestamp: min(physic, logics)
// minus 3 s, floored at 0; abnormal recovery compares against it.
func (c Checkpoint) MinTimestamp() int64 {
	m := min(c.PhysicMsgTimestamp, c.LogicsMsgTimestamp) - 3000
	return max(m, 0)
}

// Has5xFields reports whether the fields only 5.x writes (at 24 and 32)
// are set: a trace of a 5.x store.
func (c Checkpoint) Has5xFields() bool { return c.MasterFlushedOffset != 0 || c.ConfirmPhyOffset != 0 }

// DecodeCheckpoint decodes the checkpoint at b[0].
func DecodeCheckpoint(b []byte, off int64) (Checkpoint, error) {
	c := format.Cursor{B: b}
	cp := Checkpoint{
		PhysicMsgTimestamp:  int64(c.U64("physicMsgTimestamp")),
		LogicsMsgTimestamp:  int64(c.U64("logicsMsgTimestamp")),
		IndexMsgTimestamp:   int64(c.U64("indexMsgTimestamp")),
		MasterFlushedOffset: int64(c.U64("masterFlushedOffset")),
		ConfirmPhyOffset:    int64(c.U64("confirmPhyOffset")),
	}
	return cp, c.Err(off)
}

// AppendCheckpoint appends the CheckpointSize bytes of c
// (StoreCheckpoint.flush; the broker's page beyond them stays zero).
func AppendCheckpoint(dst []byte, c Checkpoint) []byte {
	dst = binary.BigEndian.AppendUint64(dst, uint64(c.PhysicMsgTimestamp))
	dst = AppendCheckpointTimestamps(dst, c.LogicsMsgTimestamp, c.IndexMsgTimestamp)
	dst = binary.BigEndian.AppendUint64(dst, uint64(c.MasterFlushedOffset))
	return binary.BigEndian.AppendUint64(dst, uint64(c.ConfirmPhyOffset))
}

// AppendCheckpointTimestamps appends the CheckpointTimestampsSize bytes
// that sit at CheckpointTimestampsOffset: logicsMsgTimestamp, then
// indexMsgTimestamp.
func AppendCheckpointTimestamps(dst []byte, logics, index int64) []byte {
	dst = binary.BigEndian.AppendUint64(dst, uint64(logics))
	return binary.BigEndian.AppendUint64(dst, uint64(index))
}
