package quorum

// Finding codes of RabbitMQ quorum queues (quorum/) and of the ra
// coordination system (coordination/: the stream coordinator, khepri),
// in the shape store.component.what of docs/cli.md. This file is the
// only place they are spelled; never rename one, scripts match on them.
// The coordination codes are the quorum ones with component
// "coordination" (Code).

// WAL files (<node>/<N>.wal).
const (
	// CodeWALTornTail: the last record is cut short by the end of the
	// file. Every ra drops it silently at the next start.
	CodeWALTornTail = "rabbitmq.quorum.wal-torn-tail"
	// CodeWALChecksumLast: the last record's Adler-32 fails. ra >= 2.0.13
	// drops it and starts; older ra refuses the WAL.
	CodeWALChecksumLast = "rabbitmq.quorum.wal-checksum-last"
	// CodeWALChecksum: a record's Adler-32 fails and more records follow:
	// ra refuses the WAL (wal_checksum_validation_failure) and every
	// quorum queue of the node is down.
	CodeWALChecksum = "rabbitmq.quorum.wal-checksum"
	// CodeWALBadHeader: the file does not start with "RAWA" version 1
	// (unknown_wal_file_format): the WAL does not start.
	CodeWALBadHeader = "rabbitmq.quorum.wal-bad-header"
	// CodeWALEmpty: a WAL of fewer than 5 bytes: ra's header read fails
	// (ra#165, ra#170) and the WAL does not start.
	CodeWALEmpty = "rabbitmq.quorum.wal-empty"
	// CodeWALUnknownWriter: a record refers to a writer the file has not
	// defined: ra 2.2-2.15 crash on it, 2.16 skips it.
	CodeWALUnknownWriter = "rabbitmq.quorum.wal-unknown-writer"
	// CodeWALOrphanWriter: records of a UId with no replica dir (a
	// deleted queue, ra#348): skipped.
	CodeWALOrphanWriter = "rabbitmq.quorum.wal-orphan-writer"
	// CodeWALBadEntry: a record whose data is not an Erlang term, where
	// the checksum cannot vouch for it (written with compute_checksums
	// off: checksum 0); a record whose computed checksum holds is the bytes
	// ra wrote, term_to_binary's.
	CodeWALBadEntry = "rabbitmq.quorum.wal-bad-entry"
	// CodeWALZeroTail: zero bytes after the last record (a pre-allocated
	// WAL); informational.
	CodeWALZeroTail = "rabbitmq.quorum.wal-zero-tail"
	// CodeWALBadName: a .wal file whose name ra does not parse.
	CodeWALBadName = "rabbitmq.quorum.wal-bad-name"
)

// Segment files (<UId>/<N>.segment).
const (
	// CodeSegmentCRC: an entry's CRC-32 fails: reading it exits
	// ra_log_segment_crc_check_failure, the queue crash-loops.
	CodeSegmentCRC = "rabbitmq.quorum.segment-crc"
	// CodeSegmentShort: an entry's data runs past the end of the file
	// (ra_log_segment_unexpected_eof).
	CodeSegmentShort = "rabbitmq.quorum.segment-short"
	// CodeSegmentBadHeader: not "RASG" version <= 2 (invalid_segment_format).
	CodeSegmentBadHeader = "rabbitmq.quorum.segment-bad-header"
	// CodeSegmentPartialIndex: the index table ends inside a slot: ra
	// cannot parse it and the member does not start.
	CodeSegmentPartialIndex = "rabbitmq.quorum.segment-partial-index"
	// CodeSegmentSlotOverflow: MaxCount is 0 but data follows: a
	// segment_max_entries of 65536 overflowed the 16-bit field
	// (rabbitmq-server #9727).
	CodeSegmentSlotOverflow = "rabbitmq.quorum.segment-slot-overflow"
	// CodeSegmentBadEntry: an entry whose data is not an Erlang term,
	// where no CRC was computed for it (CRC 0); an entry whose CRC holds is
	// the bytes ra wrote.
	CodeSegmentBadEntry = "rabbitmq.quorum.segment-bad-entry"
	// CodeSegmentReclaimable: every entry of the segment is at or below
	// the snapshot index: ra no longer needs it.
	CodeSegmentReclaimable = "rabbitmq.quorum.segment-reclaimable"
	// CodeSegmentOverwritten: slots that a later slot with a lower index
	// dropped (a leader change overwrote them); informational.
	CodeSegmentOverwritten = "rabbitmq.quorum.segment-overwritten"
	// CodeSegmentBadName: a .segment file whose name ra does not parse.
	CodeSegmentBadName = "rabbitmq.quorum.segment-bad-name"
)

// Snapshots and checkpoints (<UId>/snapshots/, <UId>/checkpoints/).
const (
	// CodeSnapshotCRC: the snapshot's CRC-32 fails: ra skips it.
	CodeSnapshotCRC = "rabbitmq.quorum.snapshot-crc"
	// CodeSnapshotBad: the snapshot does not decode (magic, version,
	// meta or state).
	CodeSnapshotBad = "rabbitmq.quorum.snapshot-bad"
	// CodeCheckpointCRC: a checkpoint's CRC-32 fails: ra removes it.
	CodeCheckpointCRC = "rabbitmq.quorum.checkpoint-crc"
	// CodeCheckpointBad: a checkpoint that does not decode.
	CodeCheckpointBad = "rabbitmq.quorum.checkpoint-bad"
	// CodeSnapshotStale: a snapshot other than the newest valid one (ra
	// deletes it at start); informational.
	CodeSnapshotStale = "rabbitmq.quorum.snapshot-stale"
)

// Replicas (<UId>/) and the log they hold.
const (
	// CodeConfigBad: the config file is missing or does not parse: the
	// queue's name is unknown and ra cannot start the member.
	CodeConfigBad = "rabbitmq.quorum.config-bad"
	// CodeConfigDataDir: the config pins the data dir of ra before 2.4.2
	// (RabbitMQ 3.10.0-3.10.13) and the replica is not there: that ra
	// reads the member's log from the pinned dir (the data was moved or
	// restored elsewhere), so the queue fails to start or reads another
	// copy's files.
	CodeConfigDataDir = "rabbitmq.quorum.config-data-dir"
	// CodeOrphanReplica: a replica dir that names.dets does not register
	// (rabbitmq-server #15725): ra starts a new member instead and this
	// data is never read.
	CodeOrphanReplica = "rabbitmq.quorum.orphan-replica"
	// CodeRegistrationUnknown: names.dets is there and could not be read:
	// whether ra registers the replica dirs is unknown (no orphan-replica
	// is drawn from it); details.replicas, waits_on.
	CodeRegistrationUnknown = "rabbitmq.quorum.registration-unknown"
	// CodeLogGap: indexes missing between the snapshot and the last entry:
	// the member cannot replay its log.
	CodeLogGap = "rabbitmq.quorum.log-gap"
	// CodeLogUnknown: an index the replay needs (a gap, or the entries
	// before a log that starts after 1 with no snapshot under it) is in
	// no file read, and a WAL or segment of the replica could not be
	// read: it may be there (not log-gap or no-snapshot-base);
	// details.index, waits_on.
	CodeLogUnknown = "rabbitmq.quorum.log-unknown"
	// CodeSnapshotUnknown: a snapshot or checkpoint ra may recover the
	// member from could not be read: the replay's base is unknown and
	// the next start not predicted; details.waits_on.
	CodeSnapshotUnknown = "rabbitmq.quorum.snapshot-unknown"
	// CodeNoSnapshotBase: the log starts after index 1 and no valid
	// snapshot or checkpoint covers the indexes before it.
	CodeNoSnapshotBase = "rabbitmq.quorum.no-snapshot-base"
	// CodeQueueDown: the queue will not start at the next start, because
	// of the finding its details name.
	CodeQueueDown = "rabbitmq.quorum.queue-down"
	// CodeSettlesLost: the newest WAL lost its tail: messages that were
	// delivered and may have been acknowledged come back at the next
	// start (details list them).
	CodeSettlesLost = "rabbitmq.quorum.settles-lost"
	// CodeReplayInexact: the next-start prediction is a range, not a
	// number (details say why).
	CodeReplayInexact = "rabbitmq.quorum.replay-inexact"
	// CodeUnreadable: a file or dir that could not be read.
	CodeUnreadable = "rabbitmq.quorum.unreadable"
	// CodeUnexpectedFile: a file ra does not write (ignored by ra).
	CodeUnexpectedFile = "rabbitmq.quorum.unexpected-file"
	// CodeReplicaBehind: with several nodes' data, a replica with a lower
	// last index or term than the most complete one.
	CodeReplicaBehind = "rabbitmq.quorum.replica-behind"
	// CodeReplicaUnknown: with several nodes' data, a replica some of
	// whose files could not be read: where its log ends is unknown, so it
	// is not compared (no replica-behind); details.waits_on.
	CodeReplicaUnknown = "rabbitmq.quorum.replica-unknown"
)

// Code returns the code for system ("quorum" or "coordination"): the
// quorum code with its component replaced.
func Code(system, quorumCode string) string {
	if system == SystemQuorum {
		return quorumCode
	}
	const prefix = "rabbitmq.quorum."
	return "rabbitmq." + system + "." + quorumCode[len(prefix):]
}

// Systems: the two ra systems of a RabbitMQ node.
const (
	SystemQuorum       = "quorum"
	SystemCoordination = "coordination"
)
