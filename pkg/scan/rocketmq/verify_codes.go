package rocketmq

// Finding codes of Verify's cross-file checks (cli-contract.md shape
// store.component.what). Never rename one: scripts match on them.
const (
	// Consume queues (consumequeue/<topic>/<queueId>/<20 digits>).
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

	// Index files (index/<17 digits>).
	CodeIndexBadEntry    = "rocketmq.index.bad-entry"
	CodeIndexBadHeader   = "rocketmq.index.bad-header"
	CodeIndexBadChain    = "rocketmq.index.bad-chain"
	CodeIndexBeyondEnd   = "rocketmq.index.beyond-end"
	CodeIndexBadFileName = "rocketmq.index.bad-file-name"

	// Checkpoint, abort marker and the recovery the broker will run.
	CodeCheckpointMissing = "rocketmq.checkpoint.missing"
	CodeCheckpointAhead   = "rocketmq.checkpoint.ahead-of-data"
	CodeRecoveryPlan      = "rocketmq.checkpoint.recovery-plan"
	CodeRecoverySkips     = "rocketmq.checkpoint.recovery-skips-undispatched"
	CodeUncleanShutdown   = "rocketmq.store.unclean-shutdown"

	// config/topics.json against the consume queue dirs.
	CodeTopicUnknown    = "rocketmq.topics.unknown-topic"
	CodeTopicNoQueueDir = "rocketmq.topics.no-queue-dir"
	CodeTopicQueueRange = "rocketmq.topics.queue-out-of-range"
	CodeTopicsBadConfig = "rocketmq.topics.bad-config"

	// CodeVerifyTooMany replaces the findings past a per-file or
	// per-queue cap.
	CodeVerifyTooMany = "rocketmq.verify.too-many-findings"
)
