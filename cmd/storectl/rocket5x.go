package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/storectl/storectl/pkg/repair"
	rmq5xrepair "github.com/storectl/storectl/pkg/repair/rmq5x"
	"github.com/storectl/storectl/pkg/salvage"
	"github.com/storectl/storectl/pkg/scan"
	"github.com/storectl/storectl/pkg/scan/cqueue"
	dlscan "github.com/storectl/storectl/pkg/scan/dledger"
	"github.com/storectl/storectl/pkg/scan/rmqconfig"
	rmqscan "github.com/storectl/storectl/pkg/scan/rocketmq"
	timerscan "github.com/storectl/storectl/pkg/scan/timer"
)

// The RocketMQ 5.x parts of a store root beyond the commitlog: the DLedger
// commitlog (dledger-<id>/, instead of or after commitlog/), the timer
// store, the config files and a RocksDB consume queue. rocket5x runs their
// scanners after the commitlog's and merges what they found.

// hasCommitLog reports whether the target has a plain commitlog to scan.
func hasCommitLog(t scan.Target) bool {
	return t.Kind != scan.TargetRocketStore || isDirPath(t.CommitLogDir)
}

func isDirPath(p string) bool {
	st, err := os.Stat(p)
	return p != "" && err == nil && st.IsDir()
}

// timerNow is the start time the timer prediction assumes (--timer-now,
// RFC 3339 or Unix ms; default now).
func timerNow(env *Env) (time.Time, error) {
	s := env.Config.GetString("timer-now")
	if s == "" {
		return time.Now(), nil
	}
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	var ms int64
	if _, err := fmt.Sscan(s, &ms); err == nil {
		return time.UnixMilli(ms), nil
	}
	return time.Time{}, usagef(fmt.Errorf("--timer-now %q: want RFC 3339 or Unix milliseconds", s))
}

// timerPrepass sets up the timer scan's part of the plain commitlog's
// scan (cfg.Tap) when the store root has a timer store beside it: the
// records the timer units point at are checked as that scan reads them,
// not read again, and the timer walk runs beside it (Prepass.Begin; the
// caller Stops it when it does not get to rocket5x). nil when there is
// nothing to prepare (or the timerlog could not be read: the timer scan
// then looks every record up itself).
func timerPrepass(ctx context.Context, env *Env, t scan.Target, so scan.Options, cfg *rmqscan.Config) *timerscan.Prepass {
	if t.Store != scan.RocketMQ || t.Kind != scan.TargetRocketStore || !hasCommitLog(t) || so.Records != nil || !timerscan.Present(t.Root) {
		return nil
	}
	pre, err := timerscan.Prepare(ctx, t.Root)
	if err != nil {
		return nil
	}
	cfg.Tap, pre.TapMaxSize = pre.Tap, cfg.MaxMessageSize
	if now, err := timerNow(env); err == nil {
		pre.Begin(ctx, timerConfig(env, t, now, pre), timerOptions(so))
	}
	return pre
}

// timerConfig is the timer scan's Config for a store root, but for its
// RecoveryEnd and CommitLog.
func timerConfig(env *Env, t scan.Target, now time.Time, pre *timerscan.Prepass) timerscan.Config {
	return timerscan.Config{Root: t.Root, CommitLogDir: t.CommitLogDir, MappedFileSize: env.Config.GetInt64("mapped-file-size"), Now: now, Prepass: pre}
}

// timerOptions are the timer scan's options.
func timerOptions(so scan.Options) scan.Options {
	return scan.Options{Records: so.Records, Progress: so.Progress}
}

// rocket5x runs the 5.x scanners for a RocketMQ store root and merges their
// results into res (the commitlog scan's, or nil). command is scan,
// verify or salvage; pre is timerPrepass's for the commitlog scan of res.
func rocket5x(ctx context.Context, env *Env, t scan.Target, so scan.Options, res *scan.Result, command string, pre *timerscan.Prepass) (*scan.Result, error) {
	if t.Store != scan.RocketMQ || t.Kind != scan.TargetRocketStore {
		return res, nil
	}
	if res == nil {
		res = &scan.Result{Store: scan.RocketMQ, Layout: map[string]any{}}
	}
	maxMsg := env.Config.GetInt("max-message-size")
	mapped := env.Config.GetInt64("mapped-file-size")
	end := int64(-1)
	if res.RecoveryEnd != nil {
		end = *res.RecoveryEnd
	}
	var dlog *dlscan.Log
	if dirs := dlscan.Dirs(t.Root); len(dirs) > 0 {
		for _, d := range dirs {
			dr, err := dlscan.Scan(ctx, dlscan.Config{Root: t.Root, Dir: d, DataFileSize: mapped, MaxMessageSize: maxMsg}, so)
			if err != nil {
				res.Fail(err)
			}
			if dr != nil {
				if !hasCommitLog(t) && dr.RecoveryEnd != nil {
					end = *dr.RecoveryEnd
				}
				mergeResult(res, dr)
			}
		}
		if !hasCommitLog(t) && len(dirs) == 1 {
			var err error
			if dlog, err = dlscan.OpenLog(dirs[0], maxMsg); err != nil {
				res.Fail(err)
			} else {
				defer dlog.Close()
			}
		}
	}
	if !hasCommitLog(t) && end >= 0 {
		e := end
		res.RecoveryEnd = &e
	}
	if timerscan.Present(t.Root) {
		tc, begun := pre.Begun() // the walk timerPrepass began, with its start time
		if !begun {
			now, err := timerNow(env)
			if err != nil {
				return res, err
			}
			tc = timerConfig(env, t, now, pre)
		}
		tc.RecoveryEnd = end
		if u, ok := res.EndUnknown(); ok {
			// The commitlog (or DLedger) scan read only part of a file (or
			// does not know which recovery runs): end is a lower bound, the
			// timer's too, not a reason to scan the commitlog again.
			tc.RecoveryEndUnknown, tc.RecoveryEndWhy = u.WaitsOn, u.Missing
			if tc.RecoveryEnd < 0 {
				tc.RecoveryEnd = u.AtLeast
			}
		}
		if dlog != nil {
			tc.CommitLog = dlog
		} else if !hasCommitLog(t) {
			tc.RecoveryEnd = 0 // no log at all: every unit points at nothing
		}
		if res != nil && begun {
			pre.CommitLogScanned(res.Files) // the tap's records per file, for readTail's
		}
		tr, err := timerscan.Scan(ctx, tc, timerOptions(so))
		if err != nil {
			res.Fail(err)
		}
		if tr != nil {
			mergeResult(res, tr)
		}
	}
	if command == "verify" {
		cr, err := rmqconfig.Scan(ctx, rmqconfig.Config{Root: t.Root, RecoveryEnd: end}, so)
		if err != nil {
			res.Fail(err)
		}
		if cr != nil {
			mergeResult(res, cr)
		}
		if l, ok := cqueue.RocksDB(t.Root); ok {
			res.Layout["consume_queue"] = "rocksdb"
			res.Add(scan.Finding{Code: "rocketmq.consumequeue.rocksdb", Severity: scan.Info, Path: cqueue.Dir, Repair: scan.RepairRebuildIndex,
				Details: map[string]any{"files": l.Files()},
				Message: "consumequeue/ holds a RocksDB consume queue (storeType=defaultRocksDB): derived data the broker rebuilds from the commitlog; storectl does not read it (rebuild-index --apply moves it aside so the broker rebuilds it)"})
		}
	}
	res.SortFindings()
	return res, nil
}

// mergeResult adds src's files, findings, bytes, layout, extra,
// assumptions and errors to dst.
func mergeResult(dst, src *scan.Result) {
	dst.Files = append(dst.Files, src.Files...)
	dst.Take(newUnreadable(dst, src.Findings))
	dst.BytesScanned += src.BytesScanned
	if dst.Layout == nil {
		dst.Layout = map[string]any{}
	}
	for k, v := range src.Layout {
		dst.Layout[k] = v
	}
	if dst.Extra == nil {
		dst.Extra = map[string]any{}
	}
	for k, v := range src.Extra {
		dst.Extra[k] = v
	}
	for _, a := range src.Assumptions {
		dst.Assume(a)
	}
	if src.Incomplete {
		dst.Incomplete = true
		dst.Errors = append(dst.Errors, src.Errors...)
	}
}

// rocketCoverage corrects the registry's claims for a DLedger store root
// without commitlog/: verify's commitlog cross checks do not run there
// (the DLedger scanner checks the consume queues itself), so the index
// files, the checkpoint and topics.json are not checked.
func rocketCoverage(inv *scan.Inventory, t scan.Target) {
	if t.Store != scan.RocketMQ || hasCommitLog(t) {
		return
	}
	for i := range inv.Components {
		c := &inv.Components[i]
		switch c.Name {
		case scan.RocketIndex, scan.RocketCheckpoint, scan.RocketTopics:
			c.Checked = false
		}
	}
}

// planTruncate5x adds truncate's 5.x actions to p: the timer units past the
// new end neutralised, the committed offsets above the new max capped;
// the findings they come from go to scanned (the plan's report), after
// the scan's own.
func planTruncate5x(ctx context.Context, env *Env, t scan.Target, p *repair.Plan, end int64, cl timerscan.CommitLog, extra map[string]any, scanned *scan.Result) error {
	now, err := timerNow(env)
	if err != nil {
		return err
	}
	tc := timerscan.Config{Root: t.Root, CommitLogDir: t.CommitLogDir, MappedFileSize: env.Config.GetInt64("mapped-file-size"), Now: now, CommitLog: cl}
	fix, err := rmq5xrepair.PlanTimerFix(ctx, p, tc, end)
	if err != nil {
		return fmt.Errorf("timer store: %w", err)
	}
	if fix.Units > 0 {
		extra["timer_fix"] = fix
	}
	oc, err := rmq5xrepair.PlanOffsetCap(p, t.Root, end)
	if err != nil {
		return fmt.Errorf("consumer offsets: %w", err)
	}
	if len(oc.Capped) > 0 {
		extra["offset_cap"] = oc
	}
	if scanned != nil {
		scanned.Take(fix.Findings)
		scanned.Take(oc.Findings)
		scanned.SortFindings()
	}
	return nil
}

// dledgerConfig is the DLedger scan config of a store root with one
// dledger-<id> dir.
func dledgerConfig(env *Env, t scan.Target) (dlscan.Config, error) {
	dirs := dlscan.Dirs(t.Root)
	if len(dirs) != 1 {
		return dlscan.Config{}, usagef(fmt.Errorf("%s has %d dledger-* dirs with a data dir; writers need exactly one", t.Root, len(dirs)))
	}
	return dlscan.Config{Root: t.Root, Dir: dirs[0], DataFileSize: env.Config.GetInt64("mapped-file-size"),
		MaxMessageSize: env.Config.GetInt("max-message-size")}, nil
}

// planDLedgerTruncate is truncate on a DLedger store root (no commitlog/):
// the DLedger log cut where its recovery stops, then the timer units and
// committed offsets past that end.
func planDLedgerTruncate(ctx context.Context, env *Env, t scan.Target) (*repair.Plan, *scan.Result, map[string]any, error) {
	dc, err := dledgerConfig(env, t)
	if err != nil {
		return nil, nil, nil, err
	}
	p, err := repair.NewPlan(t.Root, version, time.Now())
	if err != nil {
		return nil, nil, nil, err
	}
	rep, err := rmq5xrepair.PlanDLedgerTruncate(ctx, p, dc)
	if err != nil {
		return nil, nil, nil, err
	}
	extra := map[string]any{"dledger_truncate": rep}
	if rep.Recovery != nil {
		extra["recovery_end"] = rep.Recovery.WritePos
		dlog, err := dlscan.OpenLog(dc.Dir, dc.MaxMessageSize)
		if err != nil {
			return nil, nil, nil, err
		}
		defer dlog.Close()
		if err := planTruncate5x(ctx, env, t, p, rep.Recovery.WritePos, dlog, extra, rep.Scan); err != nil {
			return nil, nil, nil, err
		}
	}
	return p, rep.Scan, extra, nil
}

// stages removes several staging dirs.
type stages []interface{ RemoveStage() error }

func (s stages) RemoveStage() error {
	var first error
	for _, st := range s {
		if st == nil {
			continue
		}
		if err := st.RemoveStage(); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// planRebuild5x adds rebuild-index's 5.x actions to p: the DLedger index
// files rebuilt from the entries, a RocksDB consume queue moved aside.
// The DLedger index is staged beside the data dir when the stage is kept
// for an apply (keep), else in the temp dir: a dry run writes nothing
// beside the data dir.
func planRebuild5x(ctx context.Context, env *Env, t scan.Target, p *repair.Plan, extra map[string]any, st *stages, keep bool) error {
	if len(dlscan.Dirs(t.Root)) > 0 {
		dc, err := dledgerConfig(env, t)
		if err != nil {
			return err
		}
		dir, pattern := filepath.Dir(t.Root), "."+filepath.Base(t.Root)+".storectl-dledger-index-"
		if !keep {
			dir, pattern = scan.TempDir(), "storectl-dledger-index-"
		}
		stage, err := os.MkdirTemp(dir, pattern)
		if err != nil {
			return err
		}
		os.Remove(stage) // PlanDLedgerIndex creates it
		r, err := rmq5xrepair.PlanDLedgerIndex(ctx, p, dc, stage)
		if r != nil {
			*st = append(*st, r.Stage)
		}
		if err != nil {
			return err
		}
		extra["dledger_index"] = r
	}
	r, err := rmq5xrepair.PlanRocksDBAside(p, t.Root)
	if err != nil {
		return err
	}
	if r != nil {
		extra["rocksdb_consume_queue"] = r
	}
	return nil
}

// salvage5x adds salvage's 5.x exports: the DLedger inner messages and the
// timer messages that will never fire.
func salvage5x(ctx context.Context, env *Env, t scan.Target, o salvage.Options, w *salvage.Writer, rep *salvage.Report) error {
	if t.Kind != scan.TargetRocketStore {
		return nil
	}
	maxMsg := env.Config.GetInt("max-message-size")
	end := int64(-1)
	var dlog *dlscan.Log
	if dirs := dlscan.Dirs(t.Root); len(dirs) > 0 {
		for _, d := range dirs {
			dc := dlscan.Config{Root: t.Root, Dir: d, DataFileSize: env.Config.GetInt64("mapped-file-size"), MaxMessageSize: maxMsg}
			if err := salvage.ExportDLedger(ctx, dc, o, w, rep); err != nil {
				return err
			}
		}
		if !hasCommitLog(t) && len(dirs) == 1 {
			res, err := dlscan.Scan(ctx, dlscan.Config{Root: t.Root, Dir: dirs[0], MaxMessageSize: maxMsg}, scan.Options{})
			if err != nil {
				return err
			}
			if res.RecoveryEnd != nil {
				end = *res.RecoveryEnd
			}
			if dlog, err = dlscan.OpenLog(dirs[0], maxMsg); err != nil {
				return err
			}
			defer dlog.Close()
		}
	}
	now, err := timerNow(env)
	if err != nil {
		return err
	}
	tc := timerscan.Config{Root: t.Root, CommitLogDir: t.CommitLogDir, MappedFileSize: env.Config.GetInt64("mapped-file-size"), RecoveryEnd: end, Now: now}
	if dlog != nil {
		tc.CommitLog = dlog
	}
	return salvage.ExportTimerLost(ctx, tc, o, w, rep)
}

// newUnreadable is fs without the unreadable findings dst has already
// (the timer scan and verify's consume queue walk both read the timer
// topic's queue: a file of it that could not be read is named once).
func newUnreadable(dst *scan.Result, fs []scan.Finding) []scan.Finding {
	have := map[string]bool{}
	for _, f := range dst.Findings {
		if f.Code == scan.CodeUnreadable {
			have[f.Path] = true
		}
	}
	if len(have) == 0 {
		return fs
	}
	out := fs[:0:0]
	for _, f := range fs {
		if f.Code != scan.CodeUnreadable || !have[f.Path] {
			out = append(out, f)
		}
	}
	return out
}
