package main

import (
	"errors"

	"github.com/spf13/cobra"

	rabbitrepair "github.com/storectl/storectl/pkg/repair/rabbitmq"
	"github.com/storectl/storectl/pkg/scan"
)

func newHardenCmd(env *Env) *cobra.Command {
	return newWriterCmd(env, &cobra.Command{
		Use:   "harden DATADIR",
		Short: "RabbitMQ: rewrite gaps that older scanners misread into safe bytes (dry run unless --apply)",
		Long: `harden (RabbitMQ) finds the gaps of msg_store_persistent .rdq files in which the
scanner of --broker-version (every version when not given) misreads: zero holes
before a record (3.13.1-4.0.2), off-by-nine windows (3.13.1-4.1.4), generation-1
stops (<=3.13.0). Each such gap is rewritten, in place, into bytes no scanner
generation misreads: an unreferenced dummy record covering the gap (gaps of 31
bytes or more) or 0xFF filler, whichever the models of all three scanner
generations score best. No live record moves, so the saved index stays valid.
The plan says, per hole, which messages it protects.

Caveat: 3.13.2-4.0.2 zero-fill gaps again at their next compaction; the durable
fix for those versions is an upgrade to 4.0.3+ / 4.1.5+.

Without --apply it prints the plan and changes nothing (exit 1 when the plan has
actions). With --apply: live-broker refusal, confirmation (or --yes), backup,
staged writes and re-verify, as for truncate; 'storectl undo BACKUP_DIR --apply'
puts everything back.

` + exitCodesHelp,
	}, func(t scan.Target, _ *writerOptions) (*writer, error) {
		if t.Store != scan.RabbitMQ {
			return nil, usagef(errors.New("harden applies to RabbitMQ data dirs only"))
		}
		return &writer{plan: withQuorumPlan(t, "harden", rabbitPlan(env, t, "harden", rabbitrepair.PlanHarden, nil), false), verify: rabbitVerifier(env, t)}, nil
	})
}
