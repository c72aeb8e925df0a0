package rocketmq

// Finding codes (cli-contract.md, plus our own in the same shape).
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
	CodeTooManyFindings  = "rocketmq.commitlog.too-many-findings"
)
