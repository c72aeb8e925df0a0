package main

import (
	"runtime"

	"github.com/spf13/cobra"

	"github.com/storectl/storectl/pkg/scan"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "0.1.0-dev"

const exitCodesHelp = `Exit codes (the same in every output format):
  0   clean: no finding at or above --fail-on (after --apply: applied and re-verified clean)
  1   findings at or above --fail-on; for a dry run: the plan has actions
  2   usage or configuration error (bad flag, unknown layout, path missing)
  3   incomplete: an I/O or internal error stopped part of the work (report has "incomplete": true)
  4   refused: live broker, plan preconditions changed, --apply on a non-TTY without --yes
  5   apply failed part-way; the report says what was rolled back
  130 interrupted`

func newRootCmd(env *Env) *cobra.Command {
	root := &cobra.Command{
		Use:   "storectl",
		Short: "Inspect and repair RocketMQ and RabbitMQ store files, offline",
		Long: `storectl reads a stopped broker's data dir (RocketMQ commitlog/consumequeue/index,
RabbitMQ classic-queue message store and queue indexes), decodes every record,
and reports what the broker's own recovery would lose or misread.

` + exitCodesHelp,
		SilenceUsage:  true, // a corrupt file is not a usage mistake
		SilenceErrors: true, // run() prints errors exactly once
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			env.cmd = cmd
			if err := env.bindConfig(cmd); err != nil {
				return err
			}
			return env.validateCommon()
		},
	}
	root.SetIn(env.Streams.In)
	root.SetOut(env.Streams.Out) // help, --version and completion scripts: what was asked for
	root.SetErr(env.Streams.ErrOut)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usagef(err) })
	pf := root.PersistentFlags()
	pf.String("config", "", "read settings from this YAML file (default $XDG_CONFIG_HOME/storectl/config.yaml, then /etc/storectl/config.yaml)")
	pf.StringP("output", "o", "text", "output format: text, json or jsonl")
	pf.String("color", "auto", "color: auto, always or never (auto: stdout is a TTY, NO_COLOR unset, TERM != dumb)")
	pf.BoolP("verbose", "v", false, "text output: list info findings one by one too")
	pf.String("progress", "auto", "progress on stderr: auto (bar on a TTY), plain (log lines) or none")
	pf.String("fail-on", "warning", "lowest finding severity that makes the exit code 1: info, warning or error")
	pf.String("store", "", "store kind, overriding detection: rocketmq or rabbitmq")
	pf.Int("jobs", runtime.NumCPU(), "files scanned in parallel")
	pf.Float64("io-limit", 0, "read store files at most this many MB/s (10^6 bytes), for busy hosts; 0 = no limit")
	pf.String("tmp-dir", "", "directory for the temp files a run spills to (sorted runs, record tables; unlinked at once), never inside the data dir (default $TMPDIR)")
	pf.String("broker-version", "", "RabbitMQ: the broker version that will read the files (e.g. 3.13.7, 4.0.2); hazards that version does not have are info only")
	pf.String("metrics-file", "", "also write a Prometheus textfile-collector file (for node_exporter) here, rewritten atomically on every exit with storectl_exit_code")
	pf.String("broker-config", "", "RocketMQ: read layout sizes (mappedFileSizeCommitLog, ...) from this broker.conf")
	markStore(pf, scan.RabbitMQ, "broker-version")
	markStore(pf, scan.RocketMQ, "broker-config")
	root.AddCommand(newScanCmd(env), newVerifyCmd(env), newTruncateCmd(env), newRebuildIndexCmd(env), newSalvageCmd(env), newHardenCmd(env), newUndoCmd(env), newVersionCmd(env))
	setupCLI(root)
	for _, c := range root.Commands() {
		c.Args = usageArgs(c.Args)
	}
	return root
}

// usageArgs makes positional-argument errors usage errors (exit 2).
func usageArgs(a cobra.PositionalArgs) cobra.PositionalArgs {
	if a == nil {
		return nil
	}
	return func(cmd *cobra.Command, args []string) error {
		if err := a(cmd, args); err != nil {
			return usagef(err)
		}
		return nil
	}
}
