package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"

	"github.com/storectl/storectl/pkg/live"
	quorumscan "github.com/storectl/storectl/pkg/scan/quorum"
	rabbitscan "github.com/storectl/storectl/pkg/scan/rabbitmq"
	rmqscan "github.com/storectl/storectl/pkg/scan/rocketmq"
	streamscan "github.com/storectl/storectl/pkg/scan/stream"

	"github.com/storectl/storectl/pkg/report"
	"github.com/storectl/storectl/pkg/scan"
)

// rocketConfig builds the RocketMQ scanner config for t from flags,
// config file and --broker-config (flag > env > config > broker.conf >
// inferred from the files).
func rocketConfig(env *Env, t scan.Target, maxMsg int, mapped int64) (rmqscan.Config, error) {
	if maxMsg == 0 { // every command that reads a commitlog has --max-message-size
		maxMsg = env.Config.GetInt("max-message-size")
	}
	if mapped == 0 {
		mapped = env.Config.GetInt64("mapped-file-size")
	}
	cfg := rmqscan.Config{Root: t.Root, CommitLogDir: t.CommitLogDir, Files: t.Files, MaxMessageSize: maxMsg, MappedFileSize: mapped}
	if cfg.MappedFileSize == 0 {
		cfg.MappedFileSize = env.Config.GetInt64("mappedFileSizeCommitLog")
	}
	if p := env.Config.GetString("broker-config"); p != "" {
		bc, err := rmqscan.ReadBrokerConf(p)
		if err != nil {
			return cfg, usagef(fmt.Errorf("--broker-config: %w", err))
		}
		if cfg.MappedFileSize == 0 {
			cfg.MappedFileSize = bc.MappedFileSizeCommitLog
		}
	}
	return cfg, nil
}

// scanTarget runs the store-specific scanner for t.
func scanTarget(ctx context.Context, t scan.Target, so scan.Options, opts *scanOptions) (*scan.Result, error) {
	switch t.Store {
	case scan.RocketMQ:
		cfg, err := rocketConfig(opts.Env, t, opts.MaxMessageSize, opts.MappedFileSize)
		if err != nil {
			return nil, err
		}
		var res *scan.Result
		pre := timerPrepass(ctx, opts.Env, t, so, &cfg)
		defer pre.Stop()
		if hasCommitLog(t) {
			if res, err = rmqscan.ScanCommitLog(ctx, cfg, so); err != nil {
				return res, err
			}
		}
		return rocket5x(ctx, opts.Env, t, so, res, "scan", pre)
	case scan.RabbitMQ:
		return rabbitTarget(ctx, opts.Env, t, so, rabbitscan.Scan)
	}
	return nil, fmt.Errorf("unknown store kind %q", t.Store)
}

// rabbitTarget runs the RabbitMQ scanners a target has parts for: the
// classic-queue scanner (scan or verify) on its vhosts, message stores
// and .rdq files, the stream scanner on its stream dirs, one result.
func rabbitTarget(ctx context.Context, env *Env, t scan.Target, so scan.Options,
	classic func(context.Context, rabbitscan.Config, scan.Options) (*scan.Result, error)) (*scan.Result, error) {
	res := &scan.Result{Store: scan.RabbitMQ, Layout: map[string]any{}}
	if hasClassic(t) {
		r, err := classic(ctx, rabbitConfig(env, t), so)
		if err != nil {
			return r, err
		}
		res = r
	}
	if sc, ok := streamConfig(env, t); ok {
		sr, err := streamscan.ScanStreams(ctx, sc, so)
		if err != nil {
			return res, usageIfVersion(err)
		}
		res.Merge(sr.Result)
		for _, st := range sr.Streams {
			res.QueueLines = append(res.QueueLines, st.Queue)
		}
	}
	if qc, ok := quorumConfig(t); ok {
		// verify replays each quorum queue's log to predict its next start
		qc.Replay = verifies(classic)
		qr, err := quorumscan.Scan(ctx, qc, so)
		// only the queue lines are kept: the replay's temp file goes back
		qr.Close()
		if err != nil {
			return res, err
		}
		res.Merge(qr.Result)
		for _, q := range qr.Queues {
			res.QueueLines = append(res.QueueLines, q)
		}
	}
	return res, nil
}

// quorumConfig builds the quorum-queue scanner config for t (false: no
// ra system dirs).
func quorumConfig(t scan.Target) (quorumscan.Config, bool) {
	cfg := quorumscan.Config{Root: t.Root}
	for _, d := range t.RaDirs {
		sys := quorumscan.SystemQuorum
		if filepath.Base(filepath.Dir(d)) == quorumscan.SystemCoordination {
			sys = quorumscan.SystemCoordination
		}
		cfg.Systems = append(cfg.Systems, quorumscan.SystemDir{System: sys, Path: d, Node: filepath.Base(d)})
	}
	return cfg, len(cfg.Systems) > 0
}

// verifies reports whether classic is the classic scanner's Verify (the
// RabbitMQ scanners of verify and of a writer's re-verify).
func verifies(classic func(context.Context, rabbitscan.Config, scan.Options) (*scan.Result, error)) bool {
	return reflect.ValueOf(classic).Pointer() == reflect.ValueOf(rabbitscan.Verify).Pointer()
}

// hasClassic: the target has classic-queue parts (vhosts, message stores,
// .rdq files).
func hasClassic(t scan.Target) bool {
	switch t.Kind {
	case scan.TargetRabbitStreamRoot, scan.TargetRabbitStream, scan.TargetRabbitStreamFile,
		scan.TargetRabbitRaRoot, scan.TargetRabbitRaSystem:
		return false
	case scan.TargetRabbitNode:
		return len(t.VHostDirs) > 0 || (len(t.StreamRoots) == 0 && len(t.RaDirs) == 0)
	}
	return true
}

// streamConfig builds the stream scanner config for t (false: no streams).
func streamConfig(env *Env, t scan.Target) (streamscan.Config, bool) {
	v, _, _ := strings.Cut(env.Config.GetString("broker-version"), ",")
	cfg := streamscan.Config{Root: t.Root, StreamRoots: t.StreamRoots, StreamDirs: t.StreamDirs, BrokerVersion: strings.TrimSpace(v)}
	if t.Kind == scan.TargetRabbitStreamFile {
		cfg.Files = t.Files
	}
	return cfg, len(cfg.StreamRoots)+len(cfg.StreamDirs)+len(cfg.Files) > 0
}

// liveVerdict is what the live probes said about a data dir.
type liveVerdict struct {
	live      bool     // a broker seems to use it
	undecided bool     // a probe could not decide: a broker could have gone unseen
	reasons   []string // why it looks live
	warnings  []string // what could not be checked
}

// refusal is why a writer must not go on ("" when it may): a live
// broker, or probes that could not rule one out, unless force.
func (v liveVerdict) refusal(force bool) string {
	switch {
	case force:
		return ""
	case v.live:
		return "the broker looks live (" + strings.Join(v.reasons, "; ") + "); stop it first (or --force)"
	case v.undecided:
		return "could not tell whether a broker uses the data dir (" + strings.Join(v.warnings, "; ") + "); check it is stopped, then re-run with --force"
	}
	return ""
}

// liveCheck runs the pkg/live probes on the target's data dir, records
// their verdict in the run record (live, live_reasons, live_warnings,
// live_undecided) and warns on stderr.
func liveCheck(env *Env, run *report.Run, t scan.Target) liveVerdict {
	v := liveProbe(t)
	run.Live, run.LiveReasons, run.LiveWarnings, run.LiveUndecided = v.live, v.reasons, v.warnings, v.undecided
	if v.live {
		fmt.Fprintf(env.Streams.ErrOut, "storectl: warning: the broker looks live (%s)\n", report.Escape(strings.Join(v.reasons, "; ")))
	}
	for _, w := range v.warnings {
		fmt.Fprintf(env.Streams.ErrOut, "storectl: warning: live check: %s\n", report.Escape(w))
	}
	return v
}

// liveProbe runs pkg/live on the target's data dir. A probe that fails
// outright (no /proc, an unreadable dir) leaves the verdict undecided.
func liveProbe(t scan.Target) liveVerdict {
	dir := t.Root
	if dir == "" {
		return liveVerdict{}
	}
	st, err := live.DetectWith(dir, t.Store, live.Options{Ignore: sameExecutable})
	if err != nil {
		return liveVerdict{undecided: true, warnings: []string{"the live probes could not run: " + err.Error()}}
	}
	return liveVerdict{live: st.Live, undecided: st.Undecided, reasons: st.Reasons, warnings: st.Warnings}
}

// sameExecutable reports whether process pid runs this program's
// executable file (same device and inode): another storectl, reading the
// data dir (detecting it, planning) before it reaches the writer lock, is
// no broker, and a second writer meets the lock instead of looking like
// one. A process whose executable cannot be looked at is not ignored.
func sameExecutable(pid int) bool {
	self, err := os.Stat("/proc/self/exe")
	if err != nil {
		return false
	}
	other, err := os.Stat(fmt.Sprintf("/proc/%d/exe", pid))
	return err == nil && os.SameFile(self, other)
}

// rabbitConfig builds the RabbitMQ scanner config for t.
func rabbitConfig(env *Env, t scan.Target) rabbitscan.Config {
	cfg := rabbitscan.Config{Root: t.Root, BrokerVersion: env.Config.GetString("broker-version")}
	switch t.Kind {
	case scan.TargetRabbitRDQFile:
		cfg.Files = t.Files
	case scan.TargetRabbitStoreDir:
		if cfg.StoreDirs = t.StoreDirs; len(t.VHostDirs) > 0 { // read with its vhost (inContext)
			cfg.StoreDirs, cfg.VHostDirs = nil, t.VHostDirs
		}
	default:
		cfg.VHostDirs = t.VHostDirs
	}
	return cfg
}
