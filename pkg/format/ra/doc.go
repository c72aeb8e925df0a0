// Package ra decodes and encodes the files of ra, the Raft library under
// RabbitMQ's quorum queues and its stream coordinator and metadata store:
// the write-ahead log (RAWA), segments (RASG v1 and v2), snapshots and
// checkpoints (RASN), a replica's config file, the names ra gives these
// files, and the log entries of the rabbit_fifo state machine that a
// quorum queue runs (commands.go, state.go).
//
// docs/formats/ra.md describes every layout with its upstream source
// (rabbitmq/ra ra_log_wal.erl, ra_log_segment.erl, ra_log_snapshot.erl at
// v2.2.0, v2.14.0 and v2.16.13; rabbitmq/rabbitmq-server rabbit_fifo.erl at
// v3.10.8, v4.0.5 and v4.1.8). Integers are big-endian. Decoders never open
// files, never print and never panic: corruption is a *format.CorruptError
// with the field and the byte offset. Readers work over an io.ReaderAt and
// a size and hold at most one record's bytes (plus a read-ahead window).
package ra
