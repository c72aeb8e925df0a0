package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/storectl/storectl/pkg/repair"
	rabbitrepair "github.com/storectl/storectl/pkg/repair/rabbitmq"
	rmqrepair "github.com/storectl/storectl/pkg/repair/rocketmq"
	streamrepair "github.com/storectl/storectl/pkg/repair/stream"
	"github.com/storectl/storectl/pkg/scan"
	rmqscan "github.com/storectl/storectl/pkg/scan/rocketmq"
)

func newTruncateCmd(env *Env) *cobra.Command {
	cmd := newWriterCmd(env, &cobra.Command{
		Use:   "truncate DATADIR",
		Short: "Cut torn, stale or corrupt tails the way a correct broker recovery would (dry run unless --apply)",
		Long: `truncate plans what a correct recovery does and makes it durable:

  RocketMQ: at the recovery end (with the rocketmq #10017 offset check) zero the rest
  of that commitlog file (sizes stay the mapped size), move later files that hold
  nothing valid to the backup, drop consume queue units at or past the end, and say
  which index files need rebuild-index.
  RabbitMQ: cut the torn tail of the current .rdq file at the end of its last valid
  record (decided on evidence, not by the first bad frame); other files are only
  reported. After a clean shutdown clean.dot goes to the backup so the next start
  rebuilds its index.
  RabbitMQ streams: cut the last segment after its last whole chunk whose data
  matches its CRC (a torn chunk, damaged chunks after it) and the index records
  of what is cut, as osiris' next start does; with --keep-whole-entries a torn
  chunk is instead rewritten with its whole entries (the plan says which).

Without --apply it prints the plan and changes nothing (exit 1 when the plan has
actions). With --apply it refuses on a live broker, asks once on a terminal (or
needs --yes), checks that nothing moved since the plan, copies every byte it
changes to the backup dir, writes through fsynced staging files, and re-verifies.
'storectl undo BACKUP_DIR --apply' puts everything back.

` + exitCodesHelp,
	}, func(t scan.Target, _ *writerOptions) (*writer, error) { return truncateWriter(env, t) })
	addRocketLayoutFlags(cmd, false)
	cmd.Flags().Bool("keep-whole-entries", false, "RabbitMQ streams: rewrite a torn last chunk with its entries that are whole AMQP 1.0 messages, instead of cutting the chunk away as the broker does")
	return cmd
}

// needDataDir refuses writers on a single file or a bare store dir: they
// need the whole data dir to see every file a change affects.
func needDataDir(t scan.Target) error {
	switch t.Kind {
	case scan.TargetRocketStore, scan.TargetRabbitNode, scan.TargetRabbitVHost:
		return nil
	}
	return usagef(fmt.Errorf("%s is a %s: writers need the whole data dir (the RocketMQ store root, or the RabbitMQ node or vhost dir)", t.Path, t.Kind))
}

// truncateWriter plugs the store's truncate planner and re-verify into
// the gate.
func truncateWriter(env *Env, t scan.Target) (*writer, error) {
	switch t.Store {
	case scan.RocketMQ:
		cfgFor := func() (rmqscan.Config, error) {
			return rocketConfig(env, t, 0, env.Config.GetInt64("mapped-file-size"))
		}
		plan := func(ctx context.Context) (*repair.Plan, *scan.Result, map[string]any, error) {
			cfg, err := cfgFor()
			if err != nil {
				return nil, nil, nil, err
			}
			if !hasCommitLog(t) {
				return planDLedgerTruncate(ctx, env, t)
			}
			p, rep, err := rmqrepair.PlanTruncate(ctx, cfg)
			if err != nil {
				return nil, nil, nil, err
			}
			extra := map[string]any{"truncate": rep, "recovery_end": rep.RecoveryEnd}
			if err := planTruncate5x(ctx, env, t, p, rep.RecoveryEnd, nil, extra, rep.Scan); err != nil {
				return nil, nil, nil, err
			}
			return p, rep.Scan, extra, nil
		}
		verify := func(ctx context.Context) (*scan.Result, error) {
			cfg, err := cfgFor()
			if err != nil {
				return nil, err
			}
			so := scan.Options{Jobs: env.Config.GetInt("jobs")}
			var res *scan.Result
			pre := timerPrepass(ctx, env, t, so, &cfg)
			defer pre.Stop()
			if hasCommitLog(t) {
				if res, err = rmqscan.ScanCommitLog(ctx, cfg, so); err != nil {
					return res, err
				}
			}
			return rocket5x(ctx, env, t, so, res, "verify", pre)
		}
		return &writer{plan: plan, verify: verify}, nil
	case scan.RabbitMQ:
		return &writer{plan: withQuorumPlan(t, "truncate", withStreamPlan(env, t, "truncate", rabbitPlan(env, t, "truncate", rabbitrepair.PlanTruncate, nil), streamrepair.PlanTruncate), true),
			verify: rabbitVerifier(env, t)}, nil
	}
	return nil, fmt.Errorf("unknown store kind %q", t.Store)
}
