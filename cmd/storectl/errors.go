package main

import (
	"errors"
)

// errFindings means the command completed and its report already says
// what it found; it maps to exit 1.
var errFindings = errors.New("findings reported")

// usageError is a bad flag, argument, configuration or layout (exit 2).
type usageError struct{ err error }

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

// refusedError is a refusal: live broker, stale plan, no --yes (exit 4).
type refusedError struct{ err error }

func (e *refusedError) Error() string { return "refused: " + e.err.Error() }
func (e *refusedError) Unwrap() error { return e.err }

// applyError is an apply that failed part-way and was rolled back (exit 5).
type applyError struct{ err error }

func (e *applyError) Error() string { return "apply failed: " + e.err.Error() }
func (e *applyError) Unwrap() error { return e.err }

// incompleteError is an I/O or internal error that stopped part of the
// work after the report was emitted (exit 3).
type incompleteError struct{ err error }

func (e *incompleteError) Error() string { return "incomplete: " + e.err.Error() }
func (e *incompleteError) Unwrap() error { return e.err }

func usagef(err error) error { return &usageError{err} }

// exitCode maps an error to the contract's exit code, honouring the
// precedence 2 > 4 > 5 > 3 > 1 > 0 when an error wraps several.
func exitCode(err error) int {
	if err == nil {
		return exitOK
	}
	var ue *usageError
	var re *refusedError
	var ae *applyError
	var ie *incompleteError
	switch {
	case errors.As(err, &ue):
		return exitUsage
	case errors.As(err, &re):
		return exitRefused
	case errors.As(err, &ae):
		return exitApplyFailed
	case errors.As(err, &ie):
		return exitIncomplete
	case errors.Is(err, errFindings):
		return exitFindings
	}
	return exitIncomplete
}
