package rabbitmq

import (
	"errors"
)

// ErrSegmentOrder is ReadQueueDirSegments' error for a queue whose .qi
// segments overlap in seq ids (headers disagreeing with file names): the
// entries cannot be handed over in seq order one segment at a time. Read
// the dir with ReadQueueDir instead.
var ErrSegmentOrder = errors.New("queue index segments overlap in seq ids")

// ReadQueueDirSegments reads dir as ReadQueueDir does, but hands its
// entries to fn, in seq order, one .qi segment at a time (at most
// rfmt.QIMaxSegmentEntryCount entries) instead of keeping them, so memory does
// not grow with the queue. A queue with v1 files (.idx, journal.jif) is
// handed over in one call: the journal applies across segments. fn sees
// the anomalies found so far, including its segment's. The QueueDir
// returned has no Entries and no Refs; its Anomalies are complete. An
// error from fn stops the read and is returned.
func ReadQueueDirSegments(dir string, v1SegmentEntryCount int, fn func(q *QueueDir, entries []QueueEntry) error) (*QueueDir, error) {
	return readQueueDirWith(dir, v1SegmentEntryCount, false, fn, nil, false)
}

// ReadQueueDirSegmentsIDs is ReadQueueDirSegments for a caller that
// wants ids as bytes: an entry whose id the index holds has it in ID
// (HasID) and an empty MsgID, so reading a queue makes no string per
// entry (a queue can hold millions).
func ReadQueueDirSegmentsIDs(dir string, v1SegmentEntryCount int, fn func(q *QueueDir, entries []QueueEntry) error) (*QueueDir, error) {
	return readQueueDirWith(dir, v1SegmentEntryCount, false, fn, nil, true)
}
