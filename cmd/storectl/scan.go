package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/storectl/storectl/pkg/report"
	"github.com/storectl/storectl/pkg/scan"
)

type scanOptions struct {
	Env            *Env
	Paths          []string
	Records        bool
	Store          string
	Jobs           int
	MaxMessageSize int
	MappedFileSize int64
}

// newScanCmd builds "storectl scan".
func newScanCmd(env *Env) *cobra.Command {
	opts := &scanOptions{Env: env}
	cmd := &cobra.Command{
		Use:   "scan PATH...",
		Short: "Decode every record of store files and report anomalies; never writes",
		Long: `scan decodes every record of one store file, a store sub-dir or a whole data dir
(RocketMQ store root, commitlog dir or file; RabbitMQ node, vhost or message-store
dir or .rdq file) and reports anomalies: stale reused-file records, zero-hole
misreads, torn tails, checksum failures. It opens files read-only.

` + exitCodesHelp,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Paths = args
			c := env.Config
			opts.Records = c.GetBool("records")
			opts.Store = c.GetString("store")
			opts.Jobs = c.GetInt("jobs")
			opts.MaxMessageSize = c.GetInt("max-message-size")
			opts.MappedFileSize = c.GetInt64("mapped-file-size")
			return runScan(cmd.Context(), opts)
		},
	}
	addRecordsFlag(cmd)
	addRocketLayoutFlags(cmd, false)
	return cmd
}

// detectAll detects every path's store (one kind at a time) and refuses
// command-line flags of the other kind.
func detectAll(env *Env, paths []string, store string) ([]scan.Target, error) {
	var ts []scan.Target
	for _, p := range paths {
		t, err := scan.Detect(p, store)
		if err != nil {
			return nil, usagef(err)
		}
		if len(ts) > 0 && ts[0].Store != t.Store {
			return nil, usagef(fmt.Errorf("%s is a %s store but %s is %s: scan one kind at a time", p, t.Store, paths[0], ts[0].Store))
		}
		ts = append(ts, t)
	}
	if err := env.checkStoreFlags(ts[0].Store); err != nil {
		return nil, err
	}
	return ts, nil
}

func runScan(ctx context.Context, opts *scanOptions) error {
	env := opts.Env
	targets, err := detectAll(env, opts.Paths, opts.Store)
	if err != nil {
		return err
	}
	var assumed []string
	for i := range targets {
		var a string
		targets[i], a = inContext(targets[i])
		assumed = append(assumed, a)
	}
	if err := useTempDir(env, targets...); err != nil {
		return err
	}
	t0 := targets[0]
	run := report.Run{Command: "scan", Args: opts.Paths, DataDir: t0.Root, Store: t0.Store,
		Layout: map[string]any{"target": t0.Kind}, DetectedFrom: t0.Evidence}
	if len(targets) > 1 {
		for _, t := range targets {
			run.Targets = append(run.Targets, report.RunTarget{Path: t.Path, DataDir: t.Root, Store: t.Store, Kind: t.Kind, DetectedFrom: t.Evidence})
		}
	}
	liveCheck(env, &run, t0)
	run.Assumptions = nonEmpty(append(assumed, versionAssumption(env, t0.Store))...)
	invs := takeCoverage("scan", &run, targets...)
	s, err := env.startSession(run)
	if err != nil {
		return err
	}
	s.multi = len(targets) > 1
	var roots []string
	for _, t := range targets {
		roots = append(roots, progressRoots(t)...)
	}
	prog := env.newProgress(treeSize(roots...))
	so := scan.Options{Jobs: opts.Jobs, Progress: prog.add}
	if opts.Records {
		so.Records = s.record
	}
	for i, t := range targets {
		if ctx.Err() != nil {
			break
		}
		if s.multi {
			s.beginTarget(t)
			if opts.Records {
				so.Records = rootedRecords(s.record, t.Root)
			}
		}
		if err := s.coverage(invs[i : i+1]); err != nil {
			return err
		}
		if err := s.oddFindings(ctx, t); err != nil {
			return err
		}
		res, err := scanTarget(ctx, t, so, opts)
		if res == nil {
			res = &scan.Result{Store: t.Store}
		}
		if err != nil {
			res.Fail(err)
		}
		if err := s.result(res); err != nil {
			return err
		}
	}
	prog.finish()
	code := s.code()
	if ctx.Err() != nil {
		s.incomplete = true
		s.errors = append(s.errors, "interrupted")
		code = exitInterrupted
	}
	return s.finish(code)
}

// progressRoots are the paths whose bytes a scan of t reads (the progress
// total): the commitlog for RocketMQ, the message stores for RabbitMQ.
func progressRoots(t scan.Target) []string {
	switch {
	case len(t.Files) > 0:
		return t.Files
	case t.Store == scan.RocketMQ && t.CommitLogDir != "":
		return []string{t.CommitLogDir}
	case len(t.StoreDirs) > 0:
		return t.StoreDirs
	}
	return []string{t.Path}
}
