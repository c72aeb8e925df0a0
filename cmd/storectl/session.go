package main

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/storectl/storectl/pkg/report"
	"github.com/storectl/storectl/pkg/scan"
)

// session is one command's report: it counts what goes through the
// emitter so the summary and the exit code always agree.
type session struct {
	env         *Env
	em          report.Emitter
	start       time.Time
	failOn      scan.Severity
	counts      map[string]int
	codes       map[string]int
	bytes       int64
	files       int
	records     int // records the reported files hold (summary.records)
	actions     int
	recoveryEnd *int64
	incomplete  bool
	errors      []string
	extra       map[string]any
	applied     *bool
	verdict     string
	backupDir   string
	assumptions []string   // what the scans assumed (scan.Result.Assumptions)
	run         report.Run // the run record (labels of the metrics file)
	// multi: the run has several targets; targets are their summaries.
	multi   bool
	targets []report.TargetSummary
	// baseline (verify --baseline) marks each finding new or persistent;
	// failNew (--fail-on new) makes only new findings fail.
	baseline    *report.Baseline
	baselineSum *report.BaselineSummary
	failNew     bool
	newCounts   map[string]int
}

// startSession creates the emitter for the command's --output and
// writes the run record.
func (e *Env) startSession(run report.Run) (*session, error) {
	f, err := e.outputFormat()
	if err != nil {
		return nil, err
	}
	failOn, failNew, err := parseFailOn(e.Config.GetString("fail-on"))
	if err != nil {
		return nil, usagef(fmt.Errorf("--fail-on: %w", err))
	}
	st := report.Style{Color: f == report.Text && e.colorOn(), Verbose: e.Config.GetBool("verbose"), Width: e.textWidth(), TTY: e.Streams.IsTTY}
	em, err := report.New(e.Streams.Out, f, st)
	if err != nil {
		return nil, usagef(err)
	}
	s := &session{env: e, em: em, start: time.Now(), failOn: failOn, failNew: failNew, run: run}
	s.resetCounts()
	e.session = s
	run.Tool = "storectl"
	run.Version = version
	return s, em.Run(run)
}

// resetCounts starts the finding counts from zero: per code, and per
// severity with all three severities present (the summary lists them).
func (s *session) resetCounts() {
	s.counts = map[string]int{"error": 0, "warning": 0, "info": 0}
	s.codes = map[string]int{}
	s.newCounts = map[string]int{}
}

func (s *session) record(rec any) error {
	return s.em.Record(rec)
}

func (s *session) finding(f scan.Finding) error {
	if s.baseline != nil {
		s.baseline.Mark(&f)
		if f.Baseline == report.BaselineNew {
			s.newCounts[f.Severity.String()]++
		}
	}
	s.counts[f.Severity.String()]++
	s.codes[f.Code]++
	if t := s.target(); t != nil {
		f.Root = t.DataDir
		t.Counts[f.Severity.String()]++
		t.Codes[f.Code]++
	}
	return s.em.Finding(f)
}

// beginTarget starts the share of the next target of a run given
// several: its files and findings carry its data dir as their root and
// count in its own summary (summary.targets).
func (s *session) beginTarget(t scan.Target) {
	s.targets = append(s.targets, report.TargetSummary{Path: t.Path, DataDir: t.Root, Store: t.Store,
		Counts: map[string]int{"error": 0, "warning": 0, "info": 0}, Codes: map[string]int{}})
}

// target is the current target's summary (nil with one target).
func (s *session) target() *report.TargetSummary {
	if len(s.targets) < 2 && !s.multi {
		return nil
	}
	return &s.targets[len(s.targets)-1]
}

func (s *session) action(a any) error {
	s.actions++
	return s.em.Action(a)
}

// result emits a scan result's files and findings and takes its totals.
func (s *session) result(res *scan.Result) error {
	// A file that could not be read has no end: it is reported as an
	// error finding (and the result is incomplete), not as a file object
	// with a value outside the contract's `end` set.
	for _, f := range res.Files {
		if f.End != "" {
			continue
		}
		named := false
		for _, g := range res.Findings {
			named = named || (g.Path == f.Path && g.Severity == scan.Error)
		}
		if !named {
			res.Findings = append(res.Findings, scan.Finding{Code: scan.CodeUnreadable, Severity: scan.Error, Path: f.Path,
				Repair: scan.RepairNone, Message: "the file could not be read; it was not checked (see summary errors)"})
		}
	}
	res.SortFindings()
	t := s.target()
	for _, f := range res.Files {
		if f.End == "" {
			continue
		}
		s.files++
		s.records += f.Records
		if t != nil {
			f.Root = t.DataDir
			t.Files++
			t.Records += f.Records
		}
		if err := s.em.File(f); err != nil {
			return err
		}
	}
	for _, f := range res.Findings {
		if err := s.finding(f); err != nil {
			return err
		}
	}
	s.bytes += res.BytesScanned
	if res.RecoveryEnd != nil {
		v := *res.RecoveryEnd
		s.recoveryEnd = &v
	}
	if res.Incomplete {
		s.incomplete = true
		s.errors = append(s.errors, res.Errors...)
	}
	if t != nil {
		t.BytesScanned += res.BytesScanned
		if res.RecoveryEnd != nil {
			v := *res.RecoveryEnd
			t.RecoveryEnd = &v
		}
		t.Incomplete = t.Incomplete || res.Incomplete
		t.Errors = append(t.Errors, res.Errors...)
	}
	for _, a := range res.Assumptions {
		if !slices.Contains(s.assumptions, a) {
			s.assumptions = append(s.assumptions, a)
		}
	}
	for k, v := range res.Extra {
		if s.extra == nil {
			s.extra = map[string]any{}
		}
		s.extra[k] = v
	}
	return nil
}

// code is the exit code the findings and errors so far call for.
func (s *session) code() int {
	if s.incomplete {
		return exitIncomplete
	}
	counts := s.counts
	if s.failNew {
		counts = s.newCounts
	}
	for sev := s.failOn; sev <= scan.Error; sev++ {
		if counts[sev.String()] > 0 {
			return exitFindings
		}
	}
	return exitOK
}

func (s *session) summary(code int) report.Summary {
	recoveryEnd := s.recoveryEnd
	if s.multi {
		recoveryEnd = nil // one per RocketMQ store: summary.targets
	}
	return report.Summary{Targets: s.targets,
		ExitCode: code, Incomplete: s.incomplete || code == exitIncomplete, Errors: s.errors,
		Counts: s.counts, Codes: s.codes, BytesScanned: s.bytes,
		DurationMS: time.Since(s.start).Milliseconds(), Files: s.files, Records: s.records,
		RecoveryEnd: recoveryEnd, Actions: s.actions, Applied: s.applied, Extra: s.extra,
		Verdict: s.verdict, BackupDir: s.backupDir, Baseline: s.baselineSum, Assumptions: s.assumptions,
	}
}

// finish writes the summary for code and returns the error that makes
// run() exit with that same code.
func (s *session) finish(code int) error {
	if s.verdict == "" {
		switch code {
		case exitRefused:
			s.verdict = "refused: " + joinErrs(s.errors)
		case exitApplyFailed:
			s.verdict = "apply failed and was rolled back: " + joinErrs(s.errors)
		}
	}
	// The metrics file first: a failure to write it is in the summary.
	if err := s.env.writeMetrics(s.env.args, code, ptr(s.summary(code))); err != nil {
		s.errors = append(s.errors, fmt.Sprintf("--metrics-file: %v", err))
		s.incomplete, code = true, max(code, exitIncomplete)
	}
	if err := s.em.Summary(s.summary(code)); err != nil {
		return &incompleteError{fmt.Errorf("writing report: %w", err)}
	}
	switch code {
	case exitOK:
		return nil
	case exitFindings:
		return errFindings
	case exitIncomplete:
		return &incompleteError{errors.New(joinErrs(s.errors))}
	case exitRefused:
		return &refusedError{errors.New(joinErrs(s.errors))}
	case exitApplyFailed:
		return &applyError{errors.New(joinErrs(s.errors))}
	case exitUsage:
		return usagef(errors.New(joinErrs(s.errors)))
	}
	return fmt.Errorf("exit %d", code)
}

// joinErrs is the errors of a report as one message ("see report" when
// there are none).
func joinErrs(es []string) string {
	if len(es) == 0 {
		return "see report"
	}
	return strings.Join(es, "; ")
}

func ptr[T any](v T) *T { return &v }
