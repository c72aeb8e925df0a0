package main

import (
	"fmt"
	"time"

	"github.com/storectl/storectl/pkg/report"
	"github.com/storectl/storectl/pkg/scan"
)

// parseFailOn reads --fail-on: a severity (info, warning, error), or
// "new": only findings the baseline (verify --baseline) did not have, at
// warning or above, make the exit code 1.
func parseFailOn(v string) (scan.Severity, bool, error) {
	if v == "new" {
		return scan.Warning, true, nil
	}
	sev, err := scan.ParseSeverity(v)
	if err != nil {
		return sev, false, fmt.Errorf("%w, or new (with --baseline)", err)
	}
	return sev, false, nil
}

// startBaseline loads verify's --baseline file into the session; from then
// on every finding is marked new or persistent.
func (s *session) startBaseline(path string) error {
	if path == "" {
		if s.failNew {
			return usagef(fmt.Errorf("--fail-on new needs --baseline FILE"))
		}
		return nil
	}
	b, err := report.LoadBaseline(path)
	if err != nil {
		return usagef(fmt.Errorf("--baseline: %w", err))
	}
	s.baseline = b
	return nil
}

// maxResolvedListed bounds the resolved findings a summary lists.
const maxResolvedListed = 1000

// finishBaseline puts the comparison into the summary and saves this run
// as the next baseline, unless the run was incomplete: findings it could
// not look for would otherwise count as resolved next time.
func (s *session) finishBaseline(dataDir string, code int) {
	if s.baseline == nil {
		return
	}
	s.baselineSum = s.baseline.Summary(maxResolvedListed)
	if s.incomplete || code == exitIncomplete || code == exitInterrupted {
		s.baselineSum.NotSaved = "the run was incomplete: the baseline keeps the last complete run"
		return
	}
	if err := s.baseline.Save(dataDir, time.Now()); err != nil {
		s.baselineSum.NotSaved = err.Error()
		s.errors = append(s.errors, fmt.Sprintf("--baseline: %v", err))
		s.incomplete = true
	}
}
