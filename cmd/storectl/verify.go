package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/storectl/storectl/pkg/report"
	"github.com/storectl/storectl/pkg/scan"
	rabbitscan "github.com/storectl/storectl/pkg/scan/rabbitmq"
	rmqscan "github.com/storectl/storectl/pkg/scan/rocketmq"
)

func newVerifyCmd(env *Env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "verify DATADIR [PEER_DATADIR...]",
		Short: "Scan a whole data dir and run every cross-file check (the cron command); never writes",
		Long: `verify scans a stopped broker's data dir (a live one runs with a warning and
"live": true) and runs every cross-file check:

  RocketMQ: consume queue units against commitlog records (offset, size, topic,
  queue, queue offset, tags code), missing and beyond-end units, index files
  (headers, hash chains, entries), checkpoint and abort state, topics.json.
  RabbitMQ: every queue-index entry against the message store, the clean-shutdown
  index (msg_store_index.ets, file_summary.ets), .qs CRCs, orphans, and a
  prediction of the next start per queue (the "queue" records), including which
  messages versions with known scanner bugs would lose.
  RabbitMQ quorum queues given the data dirs of several nodes of one cluster
  (PEER_DATADIR: copies of the other nodes' dirs): each queue's replicas
  compared (last index and term, snapshot, what each would start with) and
  the most complete one named ("quorum_replicas", replica-behind findings).

` + exitCodesHelp,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runVerify(cmd.Context(), env, args[0], args[1:]...)
		},
	}
	f := cmd.Flags()
	f.String("baseline", "", "compare with the findings of the last run kept in this file (created on the first run), mark each new or persistent, list the resolved ones, then keep this run's there; see --fail-on new")
	addRecordsFlag(cmd)
	addRocketLayoutFlags(cmd, true)
	return cmd
}

func runVerify(ctx context.Context, env *Env, dir string, peers ...string) error {
	t, err := detectAll(env, append([]string{dir}, peers...), env.Config.GetString("store"))
	if err != nil {
		return err
	}
	if err := peersUsable(t); err != nil {
		return err
	}
	tg, widened := inContext(t[0])
	if err := checkOutputs(env, tg, verifyOutputs...); err != nil {
		return err
	}
	if err := useTempDir(env, tg); err != nil {
		return err
	}
	run := report.Run{Command: "verify", Args: []string{dir}, DataDir: tg.Root, Store: tg.Store,
		Layout: map[string]any{"target": tg.Kind}, DetectedFrom: tg.Evidence}
	liveCheck(env, &run, tg)
	run.Assumptions = nonEmpty(widened, versionAssumption(env, tg.Store))
	invs := takeCoverage("verify", &run, tg)
	s, err := env.startSession(run)
	if err != nil {
		return err
	}
	if err := s.startBaseline(env.Config.GetString("baseline")); err != nil {
		return err
	}
	if err := s.coverage(invs); err != nil {
		return err
	}
	if err := s.oddFindings(ctx, tg); err != nil {
		return err
	}
	if err := s.stageFindings(tg); err != nil {
		return err
	}
	prog := env.newProgress(treeSize(tg.Path))
	so := scan.Options{Jobs: env.Config.GetInt("jobs"), Progress: prog.add}
	if env.Config.GetBool("records") {
		so.Records = s.record
	}
	res, err := verifyTarget(ctx, env, tg, so)
	prog.finish()
	if res == nil {
		res = &scan.Result{Store: tg.Store}
	}
	// The queue lines may read from a temp file until the report, the
	// json one written last by finish, is out.
	defer res.Close()
	if err != nil {
		res.Fail(err)
	}
	if len(t) > 1 && err == nil {
		if err := compareReplicas(ctx, t, res, s); err != nil {
			res.Fail(err)
		}
	}
	if err := s.result(res); err != nil {
		return err
	}
	for _, q := range res.Queues {
		if err := s.em.Queue(q); err != nil {
			return err
		}
	}
	for _, q := range res.QueueLines {
		if err := s.em.Queue(q); err != nil {
			return err
		}
	}
	if res.Layout != nil {
		if s.extra == nil {
			s.extra = map[string]any{}
		}
		s.extra["layout"] = res.Layout
	}
	code := s.code()
	if ctx.Err() != nil {
		s.incomplete, code = true, exitInterrupted
		s.errors = append(s.errors, "interrupted")
	}
	s.finishBaseline(tg.Root, code)
	if s.incomplete {
		code = max(code, exitIncomplete)
	}
	return s.finish(code)
}

// verifyTarget runs the store's full verify.
func verifyTarget(ctx context.Context, env *Env, t scan.Target, so scan.Options) (*scan.Result, error) {
	c := env.Config
	switch t.Store {
	case scan.RocketMQ:
		cfg, err := rocketConfig(env, t, 0, c.GetInt64("mapped-file-size"))
		if err != nil {
			return nil, err
		}
		vc := rmqscan.VerifyConfig{Config: cfg, CQFileSize: c.GetInt64("cq-file-size"),
			IndexSlots: c.GetInt("index-slots"), IndexEntries: c.GetInt("index-entries")}
		if p := c.GetString("broker-config"); p != "" {
			if bc, err := rmqscan.ReadBrokerConf(p); err == nil {
				if vc.CQFileSize == 0 {
					vc.CQFileSize = bc.MappedFileSizeConsumeQueue
				}
				if vc.IndexSlots == 0 {
					vc.IndexSlots = int(bc.MaxHashSlotNum)
				}
				if vc.IndexEntries == 0 {
					vc.IndexEntries = int(bc.MaxIndexNum)
				}
			}
		}
		var res *scan.Result
		pre := timerPrepass(ctx, env, t, so, &vc.Config)
		defer pre.Stop()
		if hasCommitLog(t) {
			if res, err = rmqscan.Verify(ctx, vc, so); err != nil {
				return res, err
			}
		}
		return rocket5x(ctx, env, t, so, res, "verify", pre)
	case scan.RabbitMQ:
		return rabbitTarget(ctx, env, t, so, rabbitscan.Verify)
	}
	return nil, fmt.Errorf("unknown store kind %q", t.Store)
}
