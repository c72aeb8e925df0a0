package main

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"
	"github.com/spf13/pflag"

	"github.com/storectl/storectl/pkg/report"
	"github.com/storectl/storectl/pkg/scan"
)

// What makes storectl install like any other CLI: --version, an example
// in every command's help, the store-kind flags shared by the commands
// that read a store, and the hidden gen-docs command behind `make man`
// and `make install` (man pages through cobra's doc generator, shell
// completions through cobra's own generators).

// examples are the Example sections of the commands' help, by name.
var examples = map[string]string{
	"scan": `  # decode every record of a RocketMQ store and list the anomalies
  storectl scan /var/lib/rocketmq/store
  # one .rdq file, every record as JSON lines
  storectl scan --records -o jsonl /var/lib/rabbitmq/mnesia/rabbit@host/msg_stores/vhosts/628WB79CIFDYO9LJI6DKMI09L/msg_store_persistent/0.rdq`,
	"verify": `  # the nightly check: exit 0 clean, 1 findings, 3 incomplete
  storectl verify /var/lib/rocketmq/store
  # for cron: JSON lines, a Prometheus textfile, and only new problems fail
  storectl verify -o jsonl --progress none --metrics-file /var/lib/node_exporter/textfile/storectl.prom \
    --baseline /var/lib/storectl/baseline.json --fail-on new /var/lib/rabbitmq/mnesia/rabbit@host
  # the exit code from a pipeline
  storectl verify -o jsonl /var/lib/rocketmq/store | tail -n1 | jq .exit_code`,
	"truncate": `  # dry run: print the plan, change nothing
  storectl truncate /var/lib/rocketmq/store
  # apply it (backup first), then put it back if needed
  storectl truncate --apply /var/lib/rocketmq/store
  storectl undo /var/lib/rocketmq/store.storectl-backup-20260101T031500Z --apply`,
	"rebuild-index": `  # what a rebuild would change in the consume queues and index files
  storectl rebuild-index /var/lib/rocketmq/store
  # apply it without a prompt (cron, scripts)
  storectl rebuild-index --apply --yes /var/lib/rocketmq/store`,
	"salvage": `  # every message, one body file each plus messages.jsonl
  storectl salvage /var/lib/rabbitmq/mnesia/rabbit@host --out /srv/salvage
  # the messages a recovery would lose, then re-publish them with confirms
  storectl salvage /var/lib/rabbitmq/mnesia/rabbit@host --select lost,at-risk --out /srv/salvage
  storectl salvage /var/lib/rabbitmq/mnesia/rabbit@host --select lost,at-risk --out /srv/salvage --publish amqp://guest:guest@localhost:5672/%2f`,
	"harden": `  # which gaps older scanners misread, per hole the messages it protects
  storectl harden --broker-version 3.13.7 /var/lib/rabbitmq/mnesia/rabbit@host
  storectl harden --apply --broker-version 3.13.7 /var/lib/rabbitmq/mnesia/rabbit@host`,
	"undo": `  # what the undo would restore, then restore it
  storectl undo /var/lib/rocketmq/store.storectl-backup-20260101T031500Z
  storectl undo /var/lib/rocketmq/store.storectl-backup-20260101T031500Z --apply`,
	"version": `  storectl version
  storectl version -o json | jq -r .summary.extra.version`,
	"completion": `  # bash, for this shell
  source <(storectl completion bash)
  # zsh and fish, installed for good
  storectl completion zsh > "${fpath[1]}/_storectl"
  storectl completion fish > ~/.config/fish/completions/storectl.fish`,
}

// versionTemplate is what --version prints: the same line as `storectl version`.
func versionTemplate() string {
	return fmt.Sprintf("storectl {{.Version}} (schema %s, %s)\n", report.Schema, runtime.Version())
}

// setupCLI finishes the root command: --version, examples, gen-docs.
func setupCLI(root *cobra.Command) {
	root.Version = version
	root.SetVersionTemplate(versionTemplate())
	root.Example = `  storectl verify /var/lib/rocketmq/store
  storectl truncate /var/lib/rocketmq/store         # dry run: the plan
  storectl salvage /var/lib/rabbitmq/mnesia/rabbit@host --select lost --out /srv/salvage
  source <(storectl completion bash)`
	root.InitDefaultCompletionCmd()
	for _, c := range root.Commands() {
		if ex, ok := examples[c.Name()]; ok && c.Example == "" {
			c.Example = ex
		}
		if c.Name() != "completion" {
			continue
		}
		for _, sh := range c.Commands() {
			sh.Example = "  storectl completion " + sh.Name() + " > storectl-completion." + sh.Name()
			if sh.Name() == "bash" {
				sh.Example = "  source <(storectl completion bash)\n" + sh.Example
			}
		}
	}
	root.AddCommand(newGenDocsCmd(root))
}

// The store-kind annotation of a flag: a flag given on the command line
// for a store of another kind is refused (exit 2) instead of ignored.
const storeAnnotation = "storectl_store"

func markStore(fs *pflag.FlagSet, store string, names ...string) {
	for _, n := range names {
		if err := fs.SetAnnotation(n, storeAnnotation, []string{store}); err != nil {
			panic(err) // a flag name typo in the code
		}
	}
}

// addRocketLayoutFlags adds the RocketMQ layout flags every command that
// reads a commitlog shares, with one name and one meaning; index adds
// those of the consume queue and index files (verify, rebuild-index).
func addRocketLayoutFlags(cmd *cobra.Command, index bool) {
	f := cmd.Flags()
	f.Int64("mapped-file-size", 0, "RocketMQ: commitlog file size (mappedFileSizeCommitLog); 0 infers it from the files")
	f.Int("max-message-size", 0, "RocketMQ: largest record accepted, in bytes (default: the broker's 4 MiB body limit + 64 KiB)")
	f.String("timer-now", "", "RocketMQ 5.x: the broker start the timer recovery prediction assumes (RFC 3339 or Unix ms; default now)")
	markStore(f, scan.RocketMQ, "mapped-file-size", "max-message-size", "timer-now")
	if index {
		f.Int64("cq-file-size", 0, "RocketMQ: consume queue file size (mappedFileSizeConsumeQueue); 0: the existing files, else 300000*20")
		f.Int64("index-slots", 0, "RocketMQ: index hash slots (maxHashSlotNum); 0: the existing files, else 5000000")
		f.Int64("index-entries", 0, "RocketMQ: index entries per file (maxIndexNum); 0: the existing files, else 20000000")
		markStore(f, scan.RocketMQ, "cq-file-size", "index-slots", "index-entries")
	}
}

// addRecordsFlag adds --records (scan, verify).
func addRecordsFlag(cmd *cobra.Command) {
	cmd.Flags().Bool("records", false, "emit one record per decoded message (use -o jsonl for large stores)")
}

// checkStoreFlags refuses flags given on the command line that apply to
// another store kind than store (e.g. --broker-version on a RocketMQ
// store). Values from the environment or a config file are shared by
// every store a host has, so only the command line is held to this.
func (e *Env) checkStoreFlags(store string) error {
	if e.cmd == nil {
		return nil
	}
	var bad []string
	e.cmd.Flags().Visit(func(f *pflag.Flag) {
		if k := f.Annotations[storeAnnotation]; len(k) > 0 && k[0] != store {
			bad = append(bad, fmt.Sprintf("--%s (%s only)", f.Name, k[0]))
		}
	})
	if len(bad) == 0 {
		return nil
	}
	sort.Strings(bad)
	return usagef(fmt.Errorf("%s does not apply to a %s store", strings.Join(bad, ", "), store))
}

// newGenDocsCmd is the hidden command `make man` and `make install` run:
// one man page per command and the bash, zsh and fish completions.
func newGenDocsCmd(root *cobra.Command) *cobra.Command {
	var man, comp string
	cmd := &cobra.Command{
		Use:    "gen-docs",
		Short:  "Write man pages (--man DIR) and shell completions (--completions DIR)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			if man == "" && comp == "" {
				return usagef(fmt.Errorf("gen-docs needs --man DIR and/or --completions DIR"))
			}
			return genDocs(root, man, comp)
		},
	}
	cmd.Flags().StringVar(&man, "man", "", "write one man page (section 1) per command into this dir")
	cmd.Flags().StringVar(&comp, "completions", "", "write storectl.bash, _storectl (zsh) and storectl.fish into this dir")
	return cmd
}

func genDocs(root *cobra.Command, man, comp string) error {
	if man != "" {
		if err := os.MkdirAll(man, 0o755); err != nil {
			return err
		}
		root.DisableAutoGenTag = true // pages that do not change with the build date
		hdr := &doc.GenManHeader{Title: "STORECTL", Section: "1", Source: "storectl " + version, Manual: "storectl manual"}
		if err := doc.GenManTree(root, hdr, man); err != nil {
			return err
		}
	}
	if comp != "" {
		if err := os.MkdirAll(comp, 0o755); err != nil {
			return err
		}
		gens := map[string]func(string) error{
			"storectl.bash": func(p string) error { return root.GenBashCompletionFileV2(p, true) },
			"_storectl":     root.GenZshCompletionFile,
			"storectl.fish": func(p string) error { return root.GenFishCompletionFile(p, true) },
		}
		for name, gen := range gens {
			if err := gen(filepath.Join(comp, name)); err != nil {
				return err
			}
		}
	}
	return nil
}

// textWidth is the text report's width: the terminal's, else $COLUMNS
// (what shells export, and how tests ask for a width), else 80.
func (e *Env) textWidth() int {
	if e.Streams.Width > 0 {
		return e.Streams.Width
	}
	if n, err := strconv.Atoi(e.Streams.Getenv("COLUMNS")); err == nil && n > 0 {
		return n
	}
	return report.DefaultWidth
}
