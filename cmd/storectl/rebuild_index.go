package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/storectl/storectl/pkg/repair"
	rabbitrepair "github.com/storectl/storectl/pkg/repair/rabbitmq"
	rmqrepair "github.com/storectl/storectl/pkg/repair/rocketmq"
	streamrepair "github.com/storectl/storectl/pkg/repair/stream"
	"github.com/storectl/storectl/pkg/scan"
	"github.com/storectl/storectl/pkg/scan/cqueue"
	rmqscan "github.com/storectl/storectl/pkg/scan/rocketmq"
)

func newRebuildIndexCmd(env *Env) *cobra.Command {
	cmd := newWriterCmd(env, &cobra.Command{
		Use:   "rebuild-index DATADIR",
		Short: "Regenerate derived indexes from the data files, verified, through the same plan/apply/backup path",
		Long: `rebuild-index regenerates what the broker derives from its data files:

  RocketMQ: consume queues (consumequeue/<topic>/<queueId>/), index files (index/)
  and the checkpoint's logics/index timestamps, from the valid part of the commitlog,
  exactly as the broker's dispatch writes them. Sizes come from flags, then
  --broker-config, then the existing files, then the broker's defaults.
  RabbitMQ: msg_store_index.ets and file_summary.ets of each vhost's
  msg_store_persistent, from the records the evidence scan finds and the
  reference counts of the queue indexes, so that a cleanly stopped node whose
  saved index no longer matches its files starts clean instead of rebuilding
  its index from scratch. Only when clean.dot is present and consistent; without
  clean.dot there is nothing to do (the broker scans anyway), and when it is
  inconsistent the plan removes it instead (forcing that scan) and says why.
  RabbitMQ streams: every .index that is missing or disagrees with its segment,
  rebuilt from the segment's chunks byte for byte as osiris writes it (one
  29-byte record per chunk), so the broker's index-driven start no longer cuts
  whole chunks away and consumers attaching at an offset are served.

It builds into a staging dir beside the data dir (a dry run: in --tmp-dir, since it
keeps nothing), compares with what is there and
plans replace/remove actions (dry run: per queue units added, removed and changed;
per index file entries that differ). With --apply the staged files are verified
with the same checks as verify before anything is swapped in.

` + exitCodesHelp,
	}, func(t scan.Target, wo *writerOptions) (*writer, error) {
		if t.Store == scan.RabbitMQ {
			w := &writer{verify: rabbitVerifier(env, t)}
			w.plan = withQuorumPlan(t, "rebuild", withStreamPlan(env, t, "rebuild", rabbitPlan(env, t, "rebuild", rabbitrepair.PlanRebuildIndex, func(r *rabbitrepair.RebuildReport) {
				if r != nil {
					w.stage = r
				}
			}), streamrepair.PlanRebuildIndex), false)
			return w, nil
		}
		return rocketRebuildWriter(env, t, wo), nil
	})
	addRocketLayoutFlags(cmd, true)
	return cmd
}

// rocketRebuildWriter is the RocketMQ side of rebuild-index: the planner
// stages the rebuilt consume queues and index files beside the data dir
// (the writer removes the stage after the run unless --plan-out saved a
// plan that points at it) and, for --apply, verifies them before any
// action runs.
func rocketRebuildWriter(env *Env, t scan.Target, wo *writerOptions) *writer {
	c := env.Config
	w := &writer{}
	cfgFor := func() (rmqrepair.RebuildConfig, error) {
		sc, err := rocketConfig(env, t, 0, c.GetInt64("mapped-file-size"))
		if err != nil {
			return rmqrepair.RebuildConfig{}, err
		}
		rc := rmqrepair.RebuildConfig{DataDir: sc.Root, CommitLogDir: sc.CommitLogDir, MappedFileSize: sc.MappedFileSize, MaxMessageSize: sc.MaxMessageSize,
			CQFileSize: c.GetInt64("cq-file-size"), IndexSlots: c.GetInt64("index-slots"), IndexEntries: c.GetInt64("index-entries"),
			ToolVersion: version, KeepStage: wo.Apply || c.GetString("plan-out") != "", Jobs: c.GetInt("jobs"),
			Progress: env.readLimit()}
		if p := c.GetString("broker-config"); p != "" {
			bc, err := rmqscan.ReadBrokerConf(p)
			if err != nil {
				return rc, usagef(fmt.Errorf("--broker-config: %w", err))
			}
			rc.Broker = &bc
		}
		return rc, nil
	}
	w.plan = func(ctx context.Context) (*repair.Plan, *scan.Result, map[string]any, error) {
		rc, err := cfgFor()
		if err != nil {
			return nil, nil, nil, err
		}
		var st stages
		w.stage = &st
		extra := map[string]any{}
		var p *repair.Plan
		var r *rmqrepair.RebuildReport
		if _, rocks := cqueue.RocksDB(t.Root); rocks {
			rc.SkipConsumeQueue = true // the database is moved aside, never rebuilt as file queues
		}
		if hasCommitLog(t) {
			p, r, err = rmqrepair.PlanRebuildIndex(ctx, rc)
			if r != nil {
				st = append(st, r)
			}
			if err != nil {
				return nil, nil, nil, err
			}
			extra["rebuild"] = r
		} else if p, err = repair.NewPlan(t.Root, version, time.Now()); err != nil {
			return nil, nil, nil, err
		}
		if err := planRebuild5x(ctx, env, t, p, extra, &st, rc.KeepStage); err != nil {
			return nil, nil, nil, err
		}
		if wo.Apply && len(p.Actions) > 0 && r != nil {
			chk, err := rmqrepair.VerifyStaged(ctx, rc, r)
			if err != nil {
				return nil, nil, nil, fmt.Errorf("verifying the staged indexes: %w", err)
			}
			extra["staged_check"] = chk
			if !chk.OK() {
				return nil, nil, nil, fmt.Errorf("the staged indexes fail verification, nothing applied: %s", strings.Join(chk.Problems, "; "))
			}
		}
		var scanned *scan.Result // the commitlog scan the plan came from
		if r != nil {
			scanned = r.Scan
		}
		return p, scanned, extra, nil
	}
	w.verify = func(ctx context.Context) (*scan.Result, error) {
		return verifyTarget(ctx, env, t, scan.Options{Jobs: c.GetInt("jobs"), Progress: env.readLimit()})
	}
	return w
}
