package dledger

// Finding codes of the DLedger commitlog scan (store.component.what).
// Never rename one: scripts match on them.
const (
	// Data and index files.
	CodeBadFileName = "rocketmq.dledger.bad-file-name"
	CodeBadFileSize = "rocketmq.dledger.bad-file-size" // MmapFileList.load fails: DLedger calls System.exit(-1)
	CodeOffsetGap   = "rocketmq.dledger.offset-gap"    // checkSelf fails: recovery throws DISK_ERROR
	CodeNoDataFiles = "rocketmq.dledger.no-data"
	// Entries (DLedgerMmapFileStore.recover's checks).
	CodeBadEntry   = "rocketmq.dledger.bad-entry"   // header rejected (magic, size, body length)
	CodeBadPos     = "rocketmq.dledger.bad-pos"     // pos field != where the entry sits
	CodeTorn       = "rocketmq.dledger.torn-entry"  // runs past the end of its file
	CodeIndexOrder = "rocketmq.dledger.index-order" // index != previous + 1
	CodeTermOrder  = "rocketmq.dledger.term-regress"
	CodeDropped    = "rocketmq.dledger.dropped-entries" // past where recovery stops
	CodeGarbage    = "rocketmq.dledger.garbage-after-end"
	// Index files against data.
	CodeIndexMismatch = "rocketmq.dledger.index-mismatch" // recovery truncates the index here and rebuilds it
	CodeIndexMissing  = "rocketmq.dledger.index-missing"
	CodeIndexStale    = "rocketmq.dledger.index-beyond-end"
	// The inner RocketMQ record (every commitlog check).
	CodeInnerBad     = "rocketmq.dledger.inner-bad-record"
	CodeInnerBodyCRC = "rocketmq.dledger.inner-body-crc" // DLedger keeps it; only RocketMQ's check sees it
	CodeInnerPropCRC = "rocketmq.dledger.inner-prop-crc"
	CodeInnerStale   = "rocketmq.dledger.inner-stale-offset" // PHYSICALOFFSET != pos + 48
	// checkpoint, currterm and the recovery outcome.
	CodeCheckpointMissing = "rocketmq.dledger.checkpoint-missing"
	CodeCheckpointBad     = "rocketmq.dledger.checkpoint-bad"
	CodeTermBad           = "rocketmq.dledger.currterm-bad"
	CodeUncommitted       = "rocketmq.dledger.uncommitted-entries" // on disk past committedIndex: not visible
	CodeRecoveryPlan      = "rocketmq.dledger.recovery-plan"
	CodeExit              = "rocketmq.dledger.recovery-exit" // System.exit(-1)
	// CodeUnknown: a data file the recovery reaches could not be read;
	// the entries after it are unknown, not dropped.
	CodeUnknown = "rocketmq.dledger.unknown"
	// Consume queues against the inner records.
	CodeCQNoRecord     = "rocketmq.dledger.cq-no-record"
	CodeCQMismatch     = "rocketmq.dledger.cq-mismatch"
	CodeCQBeyondCommit = "rocketmq.dledger.cq-beyond-committed"
	CodeCQTruncated    = "rocketmq.dledger.cq-truncated-by-recovery"
	CodeCQUnknown      = "rocketmq.dledger.cq-unknown" // units at or past an unread data file
	CodeRocksDBCQ      = "rocketmq.dledger.rocksdb-consume-queue"
	CodeTooMany        = "rocketmq.dledger.too-many-findings"
)
