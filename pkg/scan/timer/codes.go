package timer

// Finding codes of the timer store scan (store.component.what). Never
// rename one: scripts match on them.
const (
	// timerlog/ files and units.
	CodeLogBadFileName    = "rocketmq.timerlog.bad-file-name"
	CodeLogBadFileSize    = "rocketmq.timerlog.bad-file-size" // MappedFileQueue.load refuses it: the broker does not start
	CodeLogOffsetGap      = "rocketmq.timerlog.offset-gap"    // files not adjacent (checkSelf)
	CodeLogBadMagic       = "rocketmq.timerlog.bad-magic"     // recovery stops here
	CodeLogBadSize        = "rocketmq.timerlog.bad-size"      // recovery stops here
	CodeLogDropped        = "rocketmq.timerlog.dropped-units" // units past the point where recovery stops
	CodeLogBadPrev        = "rocketmq.timerlog.bad-prev-pos"  // prevPos not an earlier unit of the same slot
	CodeLogChainRestart   = "rocketmq.timerlog.chain-restart" // prevPos -1 although the slot has earlier units (lazy wheel, #9735)
	CodeLogBlankMisplaced = "rocketmq.timerlog.bad-blank"     // a BLANK whose remaining field is not the rest of the file
	// CodeLogUnknown: a timerlog file (or its end) that could not be read:
	// the chains and slots that lead into it are unknown, not broken.
	CodeLogUnknown = "rocketmq.timerlog.unknown"
	// CodeTargetUnknown: units pointing at or past a commitlog file that
	// could not be read in full: their records' fate is unknown, not lost.
	CodeTargetUnknown = "rocketmq.timerlog.target-unknown"
	// Unit against the commitlog record it points at.
	CodeUnitBeyondEnd     = "rocketmq.timerlog.beyond-commitlog-end" // #10668: the record is gone
	CodeUnitAtRecoveryEnd = "rocketmq.timerlog.at-recovery-end"      // #10668: the next record written there is delivered through it
	CodeUnitNotRecord     = "rocketmq.timerlog.not-a-record"
	CodeUnitSizeMismatch  = "rocketmq.timerlog.size-mismatch"
	CodeUnitWrongTopic    = "rocketmq.timerlog.wrong-topic"           // #10668: a reused offset now holds another message
	CodeUnitDeliverTime   = "rocketmq.timerlog.deliver-time-mismatch" // TIMER_OUT_MS != currWriteTime + delayedTime
	CodeUnitTopicHash     = "rocketmq.timerlog.topic-hash-mismatch"
	CodeUnitNoDeleteKey   = "rocketmq.timerlog.delete-without-key"
	// timerwheel.
	CodeWheelBadSize  = "rocketmq.timerwheel.bad-size" // TimerWheel's constructor throws: the broker does not start
	CodeWheelMissing  = "rocketmq.timerwheel.missing"
	CodeWheelSlotTime = "rocketmq.timerwheel.slot-time-mismatch"
	CodeWheelPastLog  = "rocketmq.timerwheel.slot-past-timerlog"
	CodeWheelBadUnit  = "rocketmq.timerwheel.slot-bad-unit"
	CodeWheelStale    = "rocketmq.timerwheel.stale" // behind the timerlog (written lazily); recovery revises part of it
	// config/timercheck and config/timermetrics.
	CodeCheckMissing  = "rocketmq.timercheck.missing"
	CodeCheckShort    = "rocketmq.timercheck.short"
	CodeCheckAheadLog = "rocketmq.timercheck.ahead-of-timerlog"
	CodeCheckAheadCQ  = "rocketmq.timercheck.ahead-of-consume-queue"
	CodeMetricsBad    = "rocketmq.timermetrics.bad-json"
	// The prediction of the broker's timer recovery.
	CodeRecoveryPlan = "rocketmq.timer.recovery-plan"
	CodeLost         = "rocketmq.timer.message-lost"
	CodeDuplicate    = "rocketmq.timer.duplicate-delivery"
	CodeStuckEnqueue = "rocketmq.timer.enqueue-stuck" // a timer-topic record without TIMER_OUT_MS: enqueue throws and holds
	CodeTTLExpired   = "rocketmq.timer.ttl-expired"   // the broker was down longer than the wheel's 7 days
	CodeTooMany      = "rocketmq.timer.too-many-findings"
)
