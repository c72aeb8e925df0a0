package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/storectl/storectl/pkg/report"
	"github.com/storectl/storectl/pkg/salvage"
	"github.com/storectl/storectl/pkg/scan"
	streamscan "github.com/storectl/storectl/pkg/scan/stream"
)

func newSalvageCmd(env *Env) *cobra.Command {
	var out, sel, publish string
	fl := &salvageFilterFlags{}
	cmd := &cobra.Command{
		Use:   "salvage DATADIR --out DIR",
		Short: "Export messages (all, lost, at risk, ...) into DIR and optionally re-publish them; never writes into DATADIR",
		Long: `salvage exports messages from a stopped broker's data dir into --out DIR: one body
file per message (bodies/NNNNNN-<msg id>.bin, the exact payload) and messages.jsonl
(store kind, msg id, queues or topic/queue id, exchange and routing keys or tags
and keys, properties and headers, body file, size, sha256, why it was selected).
It writes only into DIR, never into the data dir.

--select (comma-separated):
  all               every decodable message
  lost              RabbitMQ: referenced by a queue but unreadable by the broker now
                    (after a clean shutdown its saved index points elsewhere);
                    RocketMQ: the records of consume queue units at or past the
                    recovery end (the broker's recovery drops the units)
  at-risk           RabbitMQ: a version in --broker-version (comma-separated; every
                    version the scanner models when not given: the union) would
                    drop it (scanner misreads)
  unreferenced      RabbitMQ: records no queue references
  after-corruption  valid records beyond a bad region that a recovery would
                    truncate away (streams: intact messages after the first
                    damaged chunk of their stream, where a reader stops)
  crc-damaged       RabbitMQ streams: messages of chunks whose data fails its
                    CRC; quorum queues: live messages whose log entry fails its
                    CRC or checksum; flagged crc_match false (all leaves them out)
Quorum queue messages (Location "quorum") are those the queue's next start
holds, replayed from its snapshot and log as verify predicts, also of a queue
the broker cannot start (its WAL refused, or an entry failing its CRC): every
intact message; "lost" selects the messages of such a queue. An entry failing
its CRC is named in the report (file, offset, raft index, message id) and makes
the exit code 1 unless --select crc-damaged exports it.
Stream messages (Location "stream") carry the properties the broker would
deliver them with, and their stream and offset; "lost" for a stream is what the
next start of --broker-version (default 4.0.5) drops.
A selection the store kind has no notion of (at-risk, unreferenced on RocketMQ)
is refused (exit 2). Referenced messages no file holds any more (lost, but no
copy left) are listed in the report and make the exit code 1.

Filters narrow the selection: --queue NAME (RabbitMQ), --topic TOPIC[:QUEUEID]
(RocketMQ), --msg-id ID (RocketMQ: offset msg id or UNIQ_KEY), --since/--until
TIME on --time store (RocketMQ store time) or publish (RocketMQ born time;
RabbitMQ the AMQP timestamp property, so messages without one are left out).

An --out that holds an export made with the same data dir, selection and
filters is resumed: messages already in it (intact) are not written again, a
complete one is left as it is. Any other non-empty --out is refused (exit 2).
Bodies are made durable in batches (one syncfs per 1024 bodies or 64 MiB), then
messages.jsonl and the dirs; export.json says "complete" once all of it is.

--publish amqp://USER:PASS@HOST:PORT/VHOST (RabbitMQ) then re-publishes the export
with the original exchange, routing key, properties and headers, persistent,
mandatory, with publisher confirms; --publish-to QUEUE sends every message to
that queue or stream through the default exchange instead. Each confirmed message is recorded in
DIR/confirmed.jsonl; running the same command again resumes and never re-sends a
confirmed message. The exchanges and bindings must exist on the target broker.

Exit 0 when the export (and publish) completed; 1 when selected messages have no
copy left to export; 3 when a store file could not be read (the report lists it
under unread), a record could not be decoded or a message was not confirmed.

` + exitCodesHelp,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if out == "" {
				return usagef(errors.New("--out DIR is required"))
			}
			sels, err := salvage.ParseSelections(sel)
			if err != nil {
				return usagef(err)
			}
			if publish != "" {
				u, err := url.Parse(publish)
				if err != nil || (u.Scheme != "amqp" && u.Scheme != "amqps") || u.Host == "" {
					return usagef(fmt.Errorf("--publish %q: want amqp://user:pass@host:port/vhost", redact(publish)))
				}
			}
			t, err := dataDirTarget(env, args)
			if err != nil {
				return err
			}
			if err := checkOutputs(env, t, salvageOutputs...); err != nil {
				return err
			}
			if err := useTempDir(env, t); err != nil {
				return err
			}
			if publish != "" && t.Store != scan.RabbitMQ {
				return usagef(errors.New("--publish re-publishes RabbitMQ messages only"))
			}
			if err := salvage.Supported(t.Store, sels); err != nil {
				return usagef(err)
			}
			filter, err := fl.filter(t.Store)
			if err != nil {
				return usagef(err)
			}
			return runSalvage(cmd.Context(), env, t, out, sels, publish, filter)
		},
	}
	f := cmd.Flags()
	f.StringVar(&out, "out", "", "directory the export is written to (created; must not be inside the data dir)")
	f.StringVar(&sel, "select", "all", "which messages: all, lost, at-risk, unreferenced, after-corruption, crc-damaged (comma-separated)")
	f.StringVar(&publish, "publish", "", "RabbitMQ: re-publish the export to this AMQP URL with publisher confirms")
	f.String("publish-to", "", "RabbitMQ: with --publish, send every message to this queue or stream (default exchange) instead of its recorded exchange and routing key")
	markStore(f, scan.RabbitMQ, "publish")
	markStore(f, scan.RabbitMQ, "publish-to")
	fl.add(cmd)
	addRocketLayoutFlags(cmd, false)
	return cmd
}

// redact hides the password of an AMQP URL.
func redact(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.User == nil {
		return s
	}
	if _, ok := u.User.Password(); ok {
		u.User = url.UserPassword(u.User.Username(), "xxxxx")
	}
	return u.String()
}

func runSalvage(ctx context.Context, env *Env, t scan.Target, out string, sels []salvage.Selection, publish string, filter *salvage.Filter) error {
	run := report.Run{Command: "salvage", DataDir: t.Root, Store: t.Store, Layout: map[string]any{"target": t.Kind, "out": out},
		DetectedFrom: t.Evidence}
	liveCheck(env, &run, t)
	invs := takeCoverage("salvage", &run, t)
	s, err := env.startSession(run)
	if err != nil {
		return err
	}
	if err := s.coverage(invs); err != nil {
		return err
	}
	if err := s.unreadOddFindings(ctx, t); err != nil {
		return err
	}
	w, err := salvage.CreateExport(out, salvage.Spec{DataDir: t.Root, Store: t.Store, Select: sels, Filters: filter.String()})
	if errors.Is(err, salvage.ErrOutInsideData) || errors.Is(err, salvage.ErrOutNotEmpty) || errors.Is(err, salvage.ErrOtherExport) {
		s.errors = append(s.errors, err.Error())
		return s.finish(exitUsage)
	}
	if !filter.Empty() {
		w.Filter = filter.Match
	}
	if err != nil {
		s.errors = append(s.errors, err.Error())
		return s.finish(exitIncomplete)
	}
	o := salvage.Options{Select: sels}
	for _, v := range strings.Split(env.Config.GetString("broker-version"), ",") {
		if v = strings.TrimSpace(v); v != "" {
			o.BrokerVersions = append(o.BrokerVersions, v)
		}
	}
	var rep *salvage.Report
	switch t.Store {
	case scan.RabbitMQ:
		if hasClassic(t) {
			rep, err = salvage.ExportRabbitMQ(ctx, rabbitConfig(env, t), o, w)
		}
		if sc, ok := streamConfig(env, t); ok && err == nil {
			rep, err = salvage.ExportStreams(ctx, sc, o, w, rep)
			if a := streamscan.VersionAssumption(sc.Root, sc.BrokerVersion); a != "" && !slices.Contains(s.assumptions, a) {
				s.assumptions = append(s.assumptions, a) // the properties are that version's conversion
			}
		}
		if qc, ok := quorumConfig(t); ok && err == nil {
			rep, err = salvage.ExportQuorum(ctx, qc, o, w, rep)
		}
		if rep == nil && err == nil {
			rep = &salvage.Report{Store: salvage.StoreRabbitMQ, Out: w.Dir(), By: map[string]int{}}
		}
	case scan.RocketMQ:
		cfg, cerr := rocketConfig(env, t, 0, 0)
		if cerr != nil {
			w.Abort()
			return cerr
		}
		if hasCommitLog(t) {
			rep, err = salvage.ExportRocketMQ(ctx, cfg, o, w)
		} else {
			rep = &salvage.Report{Store: salvage.StoreRocketMQ, Out: w.Dir(), By: map[string]int{}}
		}
		if err == nil {
			err = salvage5x(ctx, env, t, o, w, rep)
		}
	}
	if err != nil {
		w.Abort()
		s.errors = append(s.errors, err.Error())
		if f, ok := unreadFinding(t.Root, err); ok { // a store file it could not read stopped it: name it
			if ferr := s.finding(f); ferr != nil {
				return ferr
			}
		}
		return s.finish(exitIncomplete)
	}
	if err := w.Close(); err != nil {
		s.errors = append(s.errors, err.Error())
		return s.finish(exitIncomplete)
	}
	s.extra = map[string]any{"salvage": rep, "writer": w.Stats()}
	// Each store file that could not be read is named as scan and verify
	// name it (storectl.file.unreadable), and the verdict says which.
	for _, p := range rep.UnreadFiles {
		f := scan.Finding{Code: scan.CodeUnreadable, Severity: scan.Error, Path: p, Repair: scan.RepairNone,
			Message: p + " could not be read: what it holds is not in the export, and not known lost"}
		if err := s.finding(f); err != nil {
			return err
		}
	}
	s.verdict = salvageVerdict(rep, sels, filter, w.Dir())
	code := s.code() // coverage: what holds messages and was not exported
	if len(rep.Missing) > 0 && missingApplies(sels) {
		code = max(code, exitFindings) // asked for, and no copy left to export
	}
	if damagedLeft(rep) > 0 && missingApplies(sels) {
		code = max(code, exitFindings) // quorum entries failing their CRC: not exported intact
	}
	if len(rep.Unread) > 0 {
		// What an unread file holds is neither exported nor known lost.
		for _, u := range rep.Unread {
			s.errors = append(s.errors, "not read, its messages not exported: "+u)
		}
		code = exitIncomplete
	}
	if rep.Skipped > 0 {
		s.errors = append(s.errors, fmt.Sprintf("%d selected record(s) could not be decoded", rep.Skipped))
		code = exitIncomplete
	}
	if publish != "" {
		prep, err := salvage.Publish(ctx, w.Dir(), salvage.PublishOptions{URL: publish, Queue: env.Config.GetString("publish-to")})
		if prep != nil {
			s.extra["publish"] = prep
			s.verdict += fmt.Sprintf("; published %d with confirms (%d were already confirmed, %d failed)", prep.Published, prep.AlreadyConfirmed, prep.Failed)
		}
		if err != nil {
			s.errors = append(s.errors, "publish: "+strings.ReplaceAll(err.Error(), publish, redact(publish)))
			code = exitIncomplete
		} else if prep.Failed > 0 {
			s.errors = append(s.errors, fmt.Sprintf("publish: %d message(s) not confirmed; re-run to retry", prep.Failed))
			code = exitIncomplete
		}
	}
	return s.finish(code)
}

// unreadFinding is the storectl.file.unreadable finding of the file inside
// the data dir root whose open or read err reports (a *fs.PathError), if
// it does: salvage refuses to export from a store part whose references
// it cannot read (a RabbitMQ queue index), and the report names the file
// as scan and verify do.
func unreadFinding(root string, err error) (scan.Finding, bool) {
	var pe *fs.PathError
	if !errors.As(err, &pe) || errors.Is(err, context.Canceled) {
		return scan.Finding{}, false
	}
	abs, aerr := filepath.Abs(pe.Path)
	r, rerr := filepath.Abs(root)
	if aerr != nil || rerr != nil || !within(r, abs) || abs == r {
		return scan.Finding{}, false
	}
	rel := scan.Rel(r, abs)
	return scan.Finding{Code: scan.CodeUnreadable, Severity: scan.Error, Path: rel, Repair: scan.RepairNone,
		Message: rel + " could not be read: what it holds, and which messages it references, is unknown; nothing was exported"}, true
}
