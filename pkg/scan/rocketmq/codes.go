package rocketmq

// Finding codes of the RocketMQ store, in the shape store.component.what
// of docs/cli.md. This file is the only place they are spelled: the
// scanner, verify, the repair planners (whose actions name them as their
// reason) and the tests use these constants. Never rename one: scripts
// match on them.

// Commitlog records and files (ScanCommitLog).
const (
	CodeStaleRecord      = "rocketmq.commitlog.stale-record"
	CodeBodyCRC          = "rocketmq.commitlog.body-crc"
	CodePropCRC          = "rocketmq.commitlog.prop-crc"
	CodeTornTail         = "rocketmq.commitlog.torn-tail"
	CodeShortFile        = "rocketmq.commitlog.short-file"
	CodeGarbage          = "rocketmq.commitlog.garbage"
	CodeSalvage          = "rocketmq.commitlog.salvage-candidate"
	CodeQueueRegress     = "rocketmq.commitlog.queue-offset-regress"
	CodeTimestampRegress = "rocketmq.commitlog.timestamp-regress"
	CodeBadFileName      = "rocketmq.commitlog.bad-file-name"
	CodeOffsetGap        = "rocketmq.commitlog.offset-gap"
	CodeEmptyLastFile    = "rocketmq.commitlog.empty-last-file"
	CodeEarlyEnd         = "rocketmq.commitlog.early-end"
	CodeBeyondRecovery   = "rocketmq.commitlog.beyond-recovery-end"
	// CodeCommitLogUnknown: records after a commitlog file that could not
	// be read in full; whether recovery reaches them is unknown.
	CodeCommitLogUnknown = "rocketmq.commitlog.unknown"
	// CodeCQUnknown and CodeIndexUnknown: units and index entries that
	// point at or past an unread commitlog file (fate unknown, not lost).
	CodeCQUnknown       = "rocketmq.consumequeue.unknown"
	CodeIndexUnknown    = "rocketmq.index.unknown"
	CodeTooManyFindings = "rocketmq.commitlog.too-many-findings"
	// CodeStaleTail is the reason of a truncate action for non-zero bytes
	// past the recovery end that no scan finding covers (the broker would
	// leave them on disk).
	CodeStaleTail = "rocketmq.commitlog.stale-tail"
)

// Consume queues (consumequeue/<topic>/<queueId>/<20 digits>), Verify.
const (
	CodeCQBadUnit     = "rocketmq.consumequeue.bad-unit"
	CodeCQMissing     = "rocketmq.consumequeue.missing"
	CodeCQBeyondEnd   = "rocketmq.consumequeue.beyond-end"
	CodeCQExpired     = "rocketmq.consumequeue.expired"
	CodeCQPlaceholder = "rocketmq.consumequeue.placeholder"
	CodeCQOrder       = "rocketmq.consumequeue.out-of-order"
	CodeCQBadFileName = "rocketmq.consumequeue.bad-file-name"
	CodeCQBadFileSize = "rocketmq.consumequeue.bad-file-size"
	CodeCQEmptyLast   = "rocketmq.consumequeue.empty-last-file"
	CodeCQNotChecked  = "rocketmq.consumequeue.not-checked"
	// CodeCQBeyondRecovery is the reason of a truncate action for consume
	// queue units (or whole files) at or past the recovery end.
	CodeCQBeyondRecovery = "rocketmq.consumequeue.beyond-recovery-end"
	// CodeCQExtraFile is the reason of a rebuild-index action removing a
	// consume queue file (or dir) the rebuilt store does not have.
	CodeCQExtraFile = "rocketmq.consumequeue.extra-file"
)

// Index files (index/<17 digits>), Verify.
const (
	CodeIndexBadEntry    = "rocketmq.index.bad-entry"
	CodeIndexBadHeader   = "rocketmq.index.bad-header"
	CodeIndexBadChain    = "rocketmq.index.bad-chain"
	CodeIndexBeyondEnd   = "rocketmq.index.beyond-end"
	CodeIndexBadFileName = "rocketmq.index.bad-file-name"
	// CodeIndexExtraFile is the reason of a rebuild-index action removing
	// an index file the rebuilt store does not have.
	CodeIndexExtraFile = "rocketmq.index.extra-file"
)

// Checkpoint, abort marker and the recovery the broker will run, Verify.
const (
	CodeCheckpointMissing = "rocketmq.checkpoint.missing"
	CodeCheckpointAhead   = "rocketmq.checkpoint.ahead-of-data"
	CodeRecoveryPlan      = "rocketmq.checkpoint.recovery-plan"
	CodeRecoverySkips     = "rocketmq.checkpoint.recovery-skips-undispatched"
	CodeUncleanShutdown   = "rocketmq.store.unclean-shutdown"
	// CodeCheckpointTimestamps is the reason of a rebuild-index action
	// rewriting the checkpoint's logics and index timestamps.
	CodeCheckpointTimestamps = "rocketmq.checkpoint.timestamps"
)

// config/topics.json against the consume queue dirs, Verify.
const (
	CodeTopicUnknown    = "rocketmq.topics.unknown-topic"
	CodeTopicNoQueueDir = "rocketmq.topics.no-queue-dir"
	CodeTopicQueueRange = "rocketmq.topics.queue-out-of-range"
	CodeTopicsBadConfig = "rocketmq.topics.bad-config"
)

// CodeVerifyTooMany replaces Verify's findings past a per-file or
// per-queue cap.
const CodeVerifyTooMany = "rocketmq.verify.too-many-findings"

// derivedCodes are the findings about the files rebuild-index writes
// (consume queues and index files): after a rebuild none of them may be
// left at warning or above.
var derivedCodes = map[string]bool{
	CodeCQBadUnit: true, CodeCQMissing: true, CodeCQBeyondEnd: true, CodeCQExpired: true,
	CodeCQPlaceholder: true, CodeCQOrder: true, CodeCQBadFileName: true, CodeCQBadFileSize: true,
	CodeCQEmptyLast: true, CodeCQNotChecked: true, CodeCQBeyondRecovery: true, CodeCQExtraFile: true,
	CodeIndexBadEntry: true, CodeIndexBadHeader: true, CodeIndexBadChain: true, CodeIndexBeyondEnd: true,
	CodeIndexBadFileName: true, CodeIndexExtraFile: true, CodeCQUnknown: true, CodeIndexUnknown: true,
}

// IsDerivedFileCode reports whether code is a finding about a consume
// queue or an index file, the files rebuild-index regenerates.
func IsDerivedFileCode(code string) bool { return derivedCodes[code] }
