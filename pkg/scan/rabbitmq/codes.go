package rabbitmq

// Finding codes of the RabbitMQ classic-queue store, in the shape
// store.component.what of docs/cli.md. This file is the only place
// they are spelled: the scanner, verify, the repair planners (whose
// actions name them as their reason), salvage and the tests use these
// constants. Never rename one: scripts match on them.

// Message store files (.rdq): what the evidence scan finds in one file.
const (
	CodeTornTail     = "rabbitmq.rdq.torn-tail"
	CodeGarbageTail  = "rabbitmq.rdq.garbage-tail"
	CodeUnreferenced = "rabbitmq.rdq.unreferenced"
	CodeDuplicate    = "rabbitmq.rdq.duplicate"
	CodeBadMarker    = "rabbitmq.rdq.bad-marker"
	CodeBadBody      = "rabbitmq.rdq.bad-body"
	CodeLargeInline  = "rabbitmq.rdq.large-message-inline"
	CodeTransient    = "rabbitmq.rdq.transient"
	CodeFileError    = "rabbitmq.rdq.unreadable"
	// CodeZeroTail is the reason of a truncate action for zero bytes after
	// the last record of the current file (a power-loss zero fill).
	CodeZeroTail = "rabbitmq.rdq.zero-tail"
)

// Scanner hazards: where a RabbitMQ scanner generation misreads a file.
const (
	CodeZeroHoleMisread = "rabbitmq.rdq.zero-hole-misread"
	CodeOffByNine       = "rabbitmq.rdq.off-by-nine"
	CodeGen1Stop        = "rabbitmq.rdq.gen1-stop"
	CodeScannerCrash    = "rabbitmq.rdq.scanner-crash"
)

// Queues against the message store.
const (
	CodeMessageMissing = "rabbitmq.queue.message-missing"
	// CodeMessageUnknown: a queue references a message no readable .rdq
	// holds while some .rdq could not be read: it may be there, so its
	// fate is unknown, not lost (the finding names the files it waits on).
	CodeMessageUnknown = "rabbitmq.queue.message-unknown"
	CodeQueueOrphan    = "rabbitmq.queue.orphan" // a queue dir no durable queue can own
	// CodeQueueUnreadable: a queue dir a file of which could not be read;
	// what it references is unknown (the run is incomplete).
	CodeQueueUnreadable = "rabbitmq.queue.unreadable"
)

// The clean-shutdown state (clean.dot, msg_store_index.ets,
// file_summary.ets).
const (
	CodeIndexMismatch = "rabbitmq.index.mismatch"
	// CodeIndexUnknown: checks of the clean-shutdown dumps not made for
	// want of a file that could not be read (waits_on).
	CodeIndexUnknown = "rabbitmq.index.unknown"
	CodeFileSummary  = "rabbitmq.index.file-summary"        // file_summary.ets disagrees with the files
	CodeIndexUnread  = "rabbitmq.index.unreadable"          // a clean-shutdown file that does not parse
	CodeCleanPart    = "rabbitmq.index.partial-clean-state" // only some clean-shutdown files exist
	// CodeSummaryMismatch is the reason of a rebuild-index action for a
	// file_summary.ets that is missing, unreadable or says other than the
	// files (valid or file size).
	CodeSummaryMismatch = "rabbitmq.summary.mismatch"
	// CodeCleanMarkersInconsistent is the reason of a rebuild-index action
	// removing clean.dot when the clean-shutdown markers cannot be trusted
	// (unparsable, wrong index module, client refs that cannot match the
	// queues, queues referencing messages no file holds): removing it
	// forces the dirty recovery that checks them.
	CodeCleanMarkersInconsistent = "rabbitmq.store.clean-markers-inconsistent"
	// CodeCleanStateStale is the reason of a truncate action removing
	// clean.dot when the plan changes a file the clean-shutdown state
	// (file_summary.ets, msg_store_index.ets) describes.
	CodeCleanStateStale = "rabbitmq.store.clean-state-stale"
)

// Queue index files (queues/<dir>/: .qi/.qs of index v2, .idx and
// journal.jif of v1, .queue_name) and the vhost's .config: the anomalies
// of the queue index readers (queuedir*.go).
const (
	CodeQIBadHeader     = "rabbitmq.qi.bad-header"
	CodeQITorn          = "rabbitmq.qi.torn-entry"
	CodeQIBadEntry      = "rabbitmq.qi.bad-entry"
	CodeQISeqMismatch   = "rabbitmq.qi.seq-mismatch"
	CodeQSCRC           = "rabbitmq.qs.crc"
	CodeQSBadEntry      = "rabbitmq.qs.bad-entry"
	CodeQSOrphan        = "rabbitmq.qs.orphan"
	CodeIDXBadRecord    = "rabbitmq.idx.bad-record"
	CodeIDXAllZero      = "rabbitmq.idx.all-zero"
	CodeIDXUnknownSeq   = "rabbitmq.idx.unknown-seq"
	CodeJournalTail     = "rabbitmq.journal.bad-tail"
	CodeJournalConflict = "rabbitmq.journal.conflict"
	CodeQueueName       = "rabbitmq.queue.bad-name"
	CodeVHostConfig     = "rabbitmq.vhost.bad-config"
	CodeFileTooLarge    = "rabbitmq.index.too-large"
)
