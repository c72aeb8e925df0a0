package scan

// The component registry: every kind of file a broker keeps in its data
// dir, whether it can hold messages, and which scanner reads it. A run
// inventories the whole tree it was given (inventory.go) and says, per
// component, whether it was checked; a component that holds messages and
// was not checked is a warning, so a run is never "clean" about what it did
// not read. docs/coverage.md explains the seam.
//
// To teach storectl a component: write its scanner, call it from the
// commands, then
//  1. give the scanner a name in Scanners (with the commands that run it),
//  2. set ReadBy of the component in Components to that name.
// The component then shows checked: true in every run of those commands,
// and its coverage.unchecked finding goes away.

// Scanner names (Component ReadBy values).
const (
	// ScannerRabbitClassic is pkg/scan/rabbitmq: the classic-queue message
	// stores (.rdq, clean-shutdown index) and the queue indexes.
	ScannerRabbitClassic = "rabbitmq-classic"
	// ScannerRabbitStream is pkg/scan/stream: osiris segments and indexes.
	ScannerRabbitStream = "rabbitmq-stream"
	// ScannerRabbitQuorum is pkg/scan/quorum: the ra WAL, segments,
	// snapshots and configs of quorum/ and coordination/.
	ScannerRabbitQuorum = "rabbitmq-quorum"
	// ScannerRocketCommitLog is pkg/scan/rocketmq's commitlog scan.
	ScannerRocketCommitLog = "rocketmq-commitlog"
	// ScannerRocketVerify is pkg/scan/rocketmq's cross-file checks: consume
	// queues, index files, checkpoint, config/topics.json.
	ScannerRocketVerify = "rocketmq-verify"
	// ScannerRocketTimer is pkg/scan/timer: timerlog/, timerwheel,
	// config/timercheck, config/timermetrics.
	ScannerRocketTimer = "rocketmq-timer"
	// ScannerRocketDLedger is pkg/scan/dledger: dledger-<id>/ (data,
	// index, checkpoint, currterm).
	ScannerRocketDLedger = "rocketmq-dledger"
	// ScannerRocketConfig is pkg/scan/rmqconfig: every config/*.json and
	// its .bak, the committed offsets against the queues' max.
	ScannerRocketConfig = "rocketmq-config"
	// ScannerRocketRocksDBCQ is the RocksDB consume queue check: its files
	// and version are recognised (pkg/format/rocketmq ClassifyRocksDB), its
	// data is not read (derived from the commitlog).
	ScannerRocketRocksDBCQ = "rocketmq-rocksdb-cq"
)

// Scanners lists, per scanner, the commands that run it over a whole
// target (the commands whose runs say which components were checked).
var Scanners = map[string][]string{
	ScannerRabbitClassic:   {"scan", "verify", "salvage"},
	ScannerRabbitStream:    {"scan", "verify", "salvage"},
	ScannerRabbitQuorum:    {"scan", "verify", "salvage"},
	ScannerRocketCommitLog: {"scan", "verify", "salvage"},
	ScannerRocketVerify:    {"verify"},
	ScannerRocketTimer:     {"scan", "verify", "salvage"},
	ScannerRocketDLedger:   {"scan", "verify", "salvage"},
	ScannerRocketConfig:    {"verify"},
	ScannerRocketRocksDBCQ: {"verify"},
}

// Component names. A name is store.component, like finding codes.
const (
	RabbitMsgStore     = "rabbitmq.msg-store"    // msg_store_persistent/, msg_store_transient/
	RabbitQueueIndex   = "rabbitmq.queue-index"  // queues/<hash>/ (.qi/.qs, .idx/journal.jif)
	RabbitQuorum       = "rabbitmq.quorum"       // quorum/ (ra WAL, segments, snapshots)
	RabbitStream       = "rabbitmq.stream"       // stream/ (osiris segments and indexes)
	RabbitCoordination = "rabbitmq.coordination" // coordination/ (stream coordinator, khepri)
	RabbitMetadata     = "rabbitmq.metadata"     // mnesia tables, DETS files, node bookkeeping
	RabbitUnrecognised = "rabbitmq.unrecognised" // anything else

	RocketCommitLog       = "rocketmq.commitlog"
	RocketConsumeQueue    = "rocketmq.consumequeue"
	RocketConsumeQueueExt = "rocketmq.consumequeue-ext"
	RocketRocksDBCQ       = "rocketmq.consumequeue-rocksdb"
	RocketIndex           = "rocketmq.index"
	RocketCheckpoint      = "rocketmq.checkpoint"
	RocketTopics          = "rocketmq.topics"
	RocketConfig          = "rocketmq.config"
	RocketTimerLog        = "rocketmq.timerlog"
	RocketTimerWheel      = "rocketmq.timerwheel"
	RocketTimerCheck      = "rocketmq.timercheck"
	RocketTimerMetrics    = "rocketmq.timermetrics"
	RocketDLedger         = "rocketmq.dledger"
	RocketDLedgerIndex    = "rocketmq.dledger-index"
	RocketDLedgerState    = "rocketmq.dledger-state"
	RocketCompaction      = "rocketmq.compaction"
	RocketMetadata        = "rocketmq.metadata"
	RocketUnrecognised    = "rocketmq.unrecognised"
)

// ComponentSpec is one row of the registry.
type ComponentSpec struct {
	// Messages: files of this component can hold messages (or, for the
	// timer log, the schedule their delivery depends on). Derived indexes
	// the broker rebuilds and metadata are not.
	Messages bool
	// ReadBy is the scanner that reads the component ("" = none yet).
	ReadBy string
	// What says in a few words what it is, for people.
	What string
}

// Components is the registry, keyed by component name. ReadBy is the
// one line a new scanner changes.
var Components = map[string]ComponentSpec{
	RabbitMsgStore:     {Messages: true, ReadBy: ScannerRabbitClassic, What: "classic-queue message store: .rdq files, clean-shutdown index"},
	RabbitQueueIndex:   {Messages: true, ReadBy: ScannerRabbitClassic, What: "classic-queue indexes: .qi/.qs, .idx/journal.jif"},
	RabbitQuorum:       {Messages: true, ReadBy: ScannerRabbitQuorum, What: "quorum queues: ra WAL, segments, snapshots"},
	RabbitStream:       {Messages: true, ReadBy: ScannerRabbitStream, What: "streams: osiris segments and indexes"},
	RabbitCoordination: {Messages: false, ReadBy: ScannerRabbitQuorum, What: "ra coordination system: stream coordinator, khepri metadata"},
	RabbitMetadata:     {Messages: false, ReadBy: "", What: "metadata: mnesia tables, DETS files, node bookkeeping"},
	RabbitUnrecognised: {Messages: false, ReadBy: "", What: "files storectl does not recognise"},

	RocketCommitLog:       {Messages: true, ReadBy: ScannerRocketCommitLog, What: "commitlog"},
	RocketConsumeQueue:    {Messages: false, ReadBy: ScannerRocketVerify, What: "consume queues (derived from the commitlog)"},
	RocketConsumeQueueExt: {Messages: false, ReadBy: "", What: "consume queue extension files"},
	RocketRocksDBCQ:       {Messages: false, ReadBy: ScannerRocketRocksDBCQ, What: "RocksDB consume queue (derived from the commitlog)"},
	RocketIndex:           {Messages: false, ReadBy: ScannerRocketVerify, What: "index files (derived from the commitlog)"},
	RocketCheckpoint:      {Messages: false, ReadBy: ScannerRocketVerify, What: "store checkpoint"},
	RocketTopics:          {Messages: false, ReadBy: ScannerRocketVerify, What: "topic config"},
	RocketConfig:          {Messages: false, ReadBy: ScannerRocketConfig, What: "broker config files: consumer offsets, subscriptions, delay offsets, ..."},
	RocketTimerLog:        {Messages: true, ReadBy: ScannerRocketTimer, What: "timer log: the schedule of timer messages"},
	RocketTimerWheel:      {Messages: false, ReadBy: ScannerRocketTimer, What: "timer wheel: slots into the timer log"},
	RocketTimerCheck:      {Messages: false, ReadBy: ScannerRocketTimer, What: "timer checkpoint"},
	RocketTimerMetrics:    {Messages: false, ReadBy: ScannerRocketTimer, What: "timer metrics"},
	RocketDLedger:         {Messages: true, ReadBy: ScannerRocketDLedger, What: "DLedger entry log (the commitlog in DLedger mode)"},
	RocketDLedgerIndex:    {Messages: false, ReadBy: ScannerRocketDLedger, What: "DLedger index"},
	RocketDLedgerState:    {Messages: false, ReadBy: ScannerRocketDLedger, What: "DLedger checkpoint and term"},
	RocketCompaction:      {Messages: true, ReadBy: "", What: "compacted topics: compaction log and consume queues, position checkpoint"},
	RocketMetadata:        {Messages: false, ReadBy: "", What: "markers and backups: abort, lock, *.bak"},
	RocketUnrecognised:    {Messages: false, ReadBy: "", What: "files storectl does not recognise"},
}

// Coverage finding codes: a component that was not read. Warning when
// it holds messages, info otherwise.
const (
	CodeRabbitUnchecked = "rabbitmq.coverage.unchecked"
	CodeRocketUnchecked = "rocketmq.coverage.unchecked"
)

// UncheckedCode is the coverage.unchecked code of a store kind.
func UncheckedCode(store string) string {
	if store == RocketMQ {
		return CodeRocketUnchecked
	}
	return CodeRabbitUnchecked
}

// Reads reports whether command runs scanner.
func Reads(command, scanner string) bool {
	for _, c := range Scanners[scanner] {
		if c == command {
			return true
		}
	}
	return false
}
