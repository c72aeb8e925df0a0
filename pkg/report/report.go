// Package report renders what the commands found, for people (text) and
// for programs (json, jsonl). It formats; it never decides what counts as
// an anomaly, and it writes only to the io.Writer it is given.
//
// Every command drives an Emitter in the same order: Run first, then any
// number of Record, File, Finding, Queue and Action values, then Summary
// last. JSONL streams each value as one line as soon as it arrives; JSON
// and text collect and render at Summary.
package report

import (
	"fmt"
	"io"

	"github.com/storectl/storectl/pkg/scan"
)

// Schema versions every JSON object storectl prints. Bump it on any
// breaking change to a field scripts rely on (docs/cli.md).
const Schema = "storectl/v1"

// Format is an output format.
type Format string

// Output formats.
const (
	Text  Format = "text"
	JSON  Format = "json"
	JSONL Format = "jsonl"
)

// ParseFormat validates a --output value.
func ParseFormat(s string) (Format, error) {
	switch Format(s) {
	case Text, JSON, JSONL:
		return Format(s), nil
	}
	return "", fmt.Errorf("unknown output format %q (want text, json or jsonl)", s)
}

// Style carries presentation choices made once by the command layer.
type Style struct {
	Color bool // color the verdict and severity words (text only)
	// Verbose lists info findings in text output one by one; without it
	// they are counted per code under the table (json/jsonl always list all).
	Verbose bool
	// Width is the text layout width in columns (0: DefaultWidth); TTY
	// says stdout is a terminal (the text then adds durations).
	Width int
	TTY   bool
}

// Run is the first object of every report.
type Run struct {
	Tool          string         `json:"tool"`
	Version       string         `json:"version"`
	Command       string         `json:"command"`
	Args          []string       `json:"args,omitempty"`
	DataDir       string         `json:"data_dir"`
	Store         string         `json:"store"`
	Layout        map[string]any `json:"layout,omitempty"`
	DetectedFrom  []string       `json:"detected_from,omitempty"`
	CleanShutdown map[string]any `json:"clean_shutdown,omitempty"`
	Live          bool           `json:"live"`
	// LiveUndecided: a live probe could not decide (LiveWarnings say
	// which); writers refuse without --force.
	LiveUndecided bool     `json:"live_undecided,omitempty"`
	LiveWarnings  []string `json:"live_warnings,omitempty"`
	LiveReasons   []string `json:"live_reasons,omitempty"`
	DryRun        *bool    `json:"dry_run,omitempty"`
	// Components is the coverage inventory of the data dir: every file
	// in exactly one component, and whether this run checked it.
	Components []scan.Component `json:"components,omitempty"`
	// Targets lists each path of a run given several (scan A B): each has
	// its own data dir, and its files' and findings' `root` is that dir.
	Targets []RunTarget `json:"targets,omitempty"`
	// Assumptions say what the run assumed where the path it was given
	// lacks context (e.g. the broker version), and why.
	Assumptions []string `json:"assumptions,omitempty"`
}

// Summary is the last object of every report.
type Summary struct {
	ExitCode     int            `json:"exit_code"`
	Incomplete   bool           `json:"incomplete"`
	Errors       []string       `json:"errors,omitempty"`
	Counts       map[string]int `json:"counts"`
	Codes        map[string]int `json:"codes"`
	BytesScanned int64          `json:"bytes_scanned"`
	DurationMS   int64          `json:"duration_ms"`
	Files        int            `json:"files"`
	Records      int            `json:"records"`
	RecoveryEnd  *int64         `json:"recovery_end,omitempty"`
	Actions      int            `json:"actions,omitempty"`
	Applied      *bool          `json:"applied,omitempty"`
	Extra        map[string]any `json:"extra,omitempty"`
	Verdict      string         `json:"verdict,omitempty"`
	// Assumptions say what the scans assumed where the files lack context
	// (the broker version their terms show, queue references), and why.
	Assumptions []string `json:"assumptions,omitempty"`
	// Targets is each target's own summary when the run had several
	// (recovery_end per RocketMQ store); the totals above add them up.
	Targets []TargetSummary `json:"targets,omitempty"`
	// BackupDir is where an --apply put the pre-images (what undo takes).
	BackupDir string `json:"backup_dir,omitempty"`
	// Baseline is verify --baseline's comparison with the last run.
	Baseline *BaselineSummary `json:"baseline,omitempty"`
}

// Emitter receives a report piece by piece.
type Emitter interface {
	Run(Run) error
	Record(rec any) error
	File(scan.File) error
	Finding(scan.Finding) error
	Queue(q any) error
	Action(a any) error
	// Summary writes the last object and flushes everything collected.
	Summary(Summary) error
	// Done reports whether Summary has been written.
	Done() bool
}

// New returns an Emitter writing format f to w.
func New(w io.Writer, f Format, st Style) (Emitter, error) {
	switch f {
	case JSONL:
		return newJSONL(w), nil
	case JSON:
		return newJSON(w), nil
	case Text, "":
		return newText(w, st), nil
	}
	return nil, fmt.Errorf("unknown output format %q", f)
}

// RunTarget is one path of a run given several.
type RunTarget struct {
	Path         string   `json:"path"`     // as given
	DataDir      string   `json:"data_dir"` // the root its files' paths are relative to
	Store        string   `json:"store"`
	Kind         string   `json:"kind"`
	DetectedFrom []string `json:"detected_from,omitempty"`
}

// TargetSummary is one target's share of a run given several.
type TargetSummary struct {
	Path         string         `json:"path"`
	DataDir      string         `json:"data_dir"`
	Store        string         `json:"store"`
	Files        int            `json:"files"`
	Records      int            `json:"records"`
	BytesScanned int64          `json:"bytes_scanned"`
	Counts       map[string]int `json:"counts"`
	Codes        map[string]int `json:"codes"`
	RecoveryEnd  *int64         `json:"recovery_end,omitempty"`
	Incomplete   bool           `json:"incomplete"`
	Errors       []string       `json:"errors,omitempty"`
}
