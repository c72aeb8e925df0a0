// Package timer scans the RocketMQ 5.x timer store of a data dir:
// timerlog/ (52-byte units), the timerwheel, config/timercheck and
// config/timermetrics. It checks every unit (size, magic, the prevPos
// chain of its slot, the commitlog record it points at), the wheel's
// slots against the timerlog, the checkpoint against both, and predicts
// what the broker's next start will do with each pending timer message
// (TimerMessageStore.recover, enqueue and dequeue of apache/rocketmq
// rocketmq-all-5.3.3): deliver it once, lose it, deliver it twice.
//
// Every command uses Scan: scan and verify report its findings, truncate
// neutralises the units it names past a commitlog end, salvage exports
// the messages it says will never fire.
package timer

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	ftimer "github.com/storectl/storectl/pkg/format/timer"
	"github.com/storectl/storectl/pkg/scan"
	rmqscan "github.com/storectl/storectl/pkg/scan/rocketmq"
)

// Topic is the timer topic (TimerMessageStore.TIMER_TOPIC).
const Topic = "rmq_sys_wheel_timer"

// Timer message properties (MessageConst, TimerMessageStore).
const (
	PropOutMs       = "TIMER_OUT_MS"
	PropEnqueueMs   = "TIMER_ENQUEUE_MS"
	PropDequeueMs   = "TIMER_DEQUEUE_MS"
	PropRollTimes   = "TIMER_ROLL_TIMES"
	PropDelUniqKey  = "TIMER_DEL_UNIQKEY"
	PropRealTopic   = "REAL_TOPIC"
	PropRealQueueID = "REAL_QID"
)

// Paths under the store root (TimerMessageStore.getTimerLogPath and
// getTimerWheelPath, BrokerPathConfigHelper.getTimerCheckPath and
// getTimerMetricsPath).
const (
	LogDir      = "timerlog"
	WheelFile   = "timerwheel"
	CheckFile   = "config/timercheck"
	MetricsFile = "config/timermetrics"
)

// Config says what to scan.
type Config struct {
	Root string // store root; paths in findings are relative to it
	// CommitLog is the log the units point into; nil opens the plain
	// commitlog of CommitLogDir (default Root/commitlog).
	CommitLog    CommitLog
	CommitLogDir string
	// MappedFileSize is mappedFileSizeCommitLog (0 infers it).
	MappedFileSize int64
	// RecoveryEnd is where a correct recovery of the commitlog ends (the
	// broker's max physical offset after its recovery); negative means
	// unknown, and Scan scans the commitlog to find it.
	RecoveryEnd int64
	// RecoveryEndUnknown names the commitlog file that could not be read
	// in full (rocketmq.ExtraRecoveryEndUnknown), when RecoveryEnd is only
	// the least the broker's recovery reaches: a unit pointing at or past
	// it is unknown, not gone (CodeTargetUnknown), and the next start is
	// not predicted ("" when the end is known).
	RecoveryEndUnknown string
	// RecoveryEndWhy, with RecoveryEndUnknown, says which assumption is
	// missing when the end is a lower bound for another reason than a
	// file not read (recovery_end_unknown's "missing": which recovery
	// runs); RecoveryEndUnknown is then what would tell, not a file.
	RecoveryEndWhy string
	// LogFileSize is mappedFileSizeTimerLog; 0 infers it from the files.
	LogFileSize int64
	// PrecisionMs is timerPrecisionMs; 0 means 1000.
	PrecisionMs int64
	// Now is when the prediction assumes the broker starts; zero means
	// time.Now(). The wheel covers 7 days: later starts lose more.
	Now time.Time
	// MaxFindings caps the findings per code (0 = 200); the rest are
	// counted in one CodeTooMany finding.
	MaxFindings int
	// PendingCache bounds how many pending units (due at or after the
	// read time: the dequeue simulation follows their chains) the scan
	// keeps decoded with their targets; past it, a unit is read again
	// from the timerlog and its record from the commitlog when the
	// dequeue reaches it, so memory stays flat whatever the store holds
	// pending (a store of long delays). 0 is DefaultPendingCache.
	PendingCache int
	// Prepass, when set, is what the scan of the plain commitlog found of
	// the units' targets (Prepare, then its Tap in that scan's
	// rocketmq.Config): Scan does not look up the records it vouches for.
	// It is used only with the plain commitlog (CommitLog nil).
	Prepass *Prepass
}

// DefaultPendingCache is Config.PendingCache's default: 65,536 units,
// about 25 MiB with their ids and topics.
const DefaultPendingCache = 1 << 16

// Present reports whether root holds any timer store file.
func Present(root string) bool {
	for _, p := range []string{LogDir, WheelFile, CheckFile} {
		if _, err := os.Stat(filepath.Join(root, p)); err == nil {
			return true
		}
	}
	return false
}

// Scan checks the timer store of cfg.Root. It returns an error only when
// it could not look at all; corruption is findings, and unreadable files
// mark the result Incomplete. A root without a timer store gives a result
// with no files and Layout["timer_store"] = false.
func Scan(ctx context.Context, cfg Config, opts scan.Options) (*scan.Result, error) {
	s := newScanner(cfg, opts)
	if !s.present {
		cfg.Prepass.Stop()
		return s.res, nil
	}
	e := cfg.Prepass.take(cfg)
	if e != nil {
		// Begin ran the steps that read only the timer store beside the
		// commitlog scan.
		if s = e.s; e.err != nil {
			return s.res, e.err
		}
		s.cfg.RecoveryEnd, s.cfg.RecoveryEndUnknown = cfg.RecoveryEnd, cfg.RecoveryEndUnknown
		if s.tapTail {
			s.tail = cfg.Prepass.tapReputs() // nil: predict reads the tail itself
		}
	}
	if err := s.openLog(ctx); err != nil {
		return &scan.Result{Store: scan.RocketMQ, Layout: map[string]any{"timer_store": true}}, err
	}
	if s.own != nil {
		defer s.own.Close()
	}
	if e != nil && s.pre != nil {
		s.kept = s.pre.keptTargets() // the tap's, for the targets checkTargets looks up
	}
	if e == nil {
		if err := s.run(ctx, s.framesSteps()); err != nil {
			return s.res, err
		}
	}
	s.cqAhead()
	defer s.closeCQ()
	if err := s.run(ctx, s.targetSteps()); err != nil {
		return s.res, err
	}
	s.finish()
	return s.res, ctx.Err()
}

// finish adds what the whole scan found (the parts not read, the findings
// past the caps, the summary) to the result.
func (s *scanner) finish() {
	s.unreadFindings()
	s.flushCaps()
	s.res.Extra = map[string]any{"timer": s.summary()}
	s.res.SortFindings()
}

// newScanner applies cfg's defaults and checks that there is a timer store.
func newScanner(cfg Config, opts scan.Options) *scanner {
	if cfg.PrecisionMs <= 0 {
		cfg.PrecisionMs = ftimer.DefaultPrecisionMs
	}
	if cfg.Now.IsZero() {
		cfg.Now = time.Now()
	}
	if cfg.MaxFindings <= 0 {
		cfg.MaxFindings = 200
	}
	if cfg.PendingCache <= 0 {
		cfg.PendingCache = DefaultPendingCache
	}
	present := Present(cfg.Root)
	res := &scan.Result{Store: scan.RocketMQ, Layout: map[string]any{"timer_store": present}}
	return &scanner{cfg: cfg, res: res, opts: opts, capped: map[string]int{}, present: present,
		pending: map[int64]*pendingUnit{}, rv: newResolver()}
}

// framesSteps are the steps that read only the timer store's files; with
// deferTargets the walk leaves the units' targets to targetSteps, and the
// commitlog's tail is read for the prediction (readTail).
func (s *scanner) framesSteps() []func(context.Context) error {
	steps := []func(context.Context) error{s.readCheckpoint, s.readMetrics, s.listLog, s.readWheel, s.walkLog}
	if s.deferTargets {
		steps = append(steps, s.readTail)
	}
	return steps
}

// targetSteps are the steps after the walk: the units' targets (when the
// walk deferred them), the wheel and checkpoint checks, the prediction.
func (s *scanner) targetSteps() []func(context.Context) error {
	steps := []func(context.Context) error{s.checkWheel, s.checkCheckpoint, s.predict}
	if s.deferTargets {
		steps = append([]func(context.Context) error{s.checkTargets}, steps...)
	}
	return steps
}

// run runs steps in order: a step's error fails the result, a cancelled
// context stops the run.
func (s *scanner) run(ctx context.Context, steps []func(context.Context) error) error {
	for _, step := range steps {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := step(ctx); err != nil {
			s.res.Fail(err)
		}
	}
	return nil
}

// openLog opens the commitlog the units point into and settles its
// recovery end (scanning it when cfg.RecoveryEnd is unknown). The caller
// closes s.cl when it is a FileCommitLog (closeLog).
func (s *scanner) openLog(ctx context.Context) error {
	cfg := s.cfg
	if cfg.CommitLog == nil {
		fc, err := NewFileCommitLog(rmqscan.Config{Root: cfg.Root, CommitLogDir: cfg.CommitLogDir, MappedFileSize: cfg.MappedFileSize})
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		if fc != nil {
			s.cl, s.own = fc, fc
			s.pre = cfg.Prepass
		}
	} else {
		s.cl = cfg.CommitLog
	}
	s.end = cfg.RecoveryEnd
	if s.end < 0 && s.cl != nil {
		cr, err := rmqscan.ScanCommitLog(ctx, rmqscan.Config{Root: cfg.Root, CommitLogDir: cfg.CommitLogDir, MappedFileSize: cfg.MappedFileSize}, scan.Options{Jobs: s.opts.Jobs})
		if err != nil {
			return fmt.Errorf("scanning the commitlog for its recovery end: %w", err)
		}
		if cr.RecoveryEnd != nil {
			s.end = *cr.RecoveryEnd
		}
		if u, ok := cr.EndUnknown(); ok {
			s.cfg.RecoveryEndUnknown, s.cfg.RecoveryEndWhy = u.WaitsOn, u.Missing
			s.end = u.AtLeast // the lower bound, not 0
		}
	}
	s.end = max(s.end, 0)
	return nil
}

// add records a finding, keeping at most MaxFindings per code.
func (s *scanner) add(f scan.Finding) {
	s.capped[f.Code]++
	if s.capped[f.Code] > s.cfg.MaxFindings {
		return
	}
	if f.Repair == "" {
		f.Repair = scan.RepairNone
	}
	s.res.Add(f)
}

func (s *scanner) flushCaps() {
	for code, n := range s.capped {
		if n > s.cfg.MaxFindings {
			s.res.Add(scan.Finding{Code: CodeTooMany, Severity: scan.Warning, Path: LogDir, Repair: scan.RepairNone,
				Details: map[string]any{"code": code, "total": n, "reported": s.cfg.MaxFindings},
				Message: fmt.Sprintf("%d findings of %s, only the first %d are listed", n, code, s.cfg.MaxFindings)})
		}
	}
}
