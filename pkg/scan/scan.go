// Package scan turns store files into records and findings. The
// store-specific scanners live in the rocketmq and rabbitmq sub-packages;
// this package holds the vocabulary they share: Finding, File, Result and
// Options.
//
// Corruption is data, failure is an error: a damaged record becomes a
// Finding and the scan goes on; a scanner returns an error only when it
// could not look (and then marks the Result incomplete).
package scan

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"sync"
)

// Severity ranks a finding. It marshals as "info", "warning" or "error".
type Severity int

// Severities, lowest first.
const (
	Info Severity = iota
	Warning
	Error
)

func (s Severity) String() string {
	switch s {
	case Info:
		return "info"
	case Warning:
		return "warning"
	case Error:
		return "error"
	}
	return fmt.Sprintf("severity(%d)", int(s))
}

// ParseSeverity parses "info", "warning" or "error".
func ParseSeverity(s string) (Severity, error) {
	switch s {
	case "info":
		return Info, nil
	case "warning":
		return Warning, nil
	case "error":
		return Error, nil
	}
	return Info, fmt.Errorf("unknown severity %q (want info, warning or error)", s)
}

// MarshalJSON writes the severity name.
func (s Severity) MarshalJSON() ([]byte, error) { return json.Marshal(s.String()) }

// UnmarshalJSON reads a severity name.
func (s *Severity) UnmarshalJSON(b []byte) error {
	var str string
	if err := json.Unmarshal(b, &str); err != nil {
		return err
	}
	v, err := ParseSeverity(str)
	*s = v
	return err
}

// Repair kinds a finding can point to (docs/cli.md).
const (
	RepairTruncate     = "truncate"
	RepairRebuildIndex = "rebuild-index"
	RepairNone         = "none"
)

// Finding is one problem at one place. Code is stable and dotted
// (store.component.what): scripts match on it, never rename one.
type Finding struct {
	Code     string            `json:"code"`
	Severity Severity          `json:"severity"`
	Path     string            `json:"path"`   // relative to the data dir
	Offset   int64             `json:"offset"` // byte offset in Path
	Length   int64             `json:"length"` // bytes concerned (0 when not a range)
	Expected string            `json:"expected,omitempty"`
	Actual   string            `json:"actual,omitempty"`
	Evidence map[string]string `json:"evidence,omitempty"` // check name -> "pass" | "fail" | detail
	Repair   string            `json:"repair"`             // truncate | rebuild-index | none
	Message  string            `json:"message"`            // one human sentence
	MsgID    string            `json:"msg_id,omitempty"`   // the message concerned (for a misread: the victim)
	// Key and Baseline are set by verify --baseline: the finding's stable
	// key and whether the baseline run had it (new | persistent).
	Key      string         `json:"key,omitempty"`
	Baseline string         `json:"baseline,omitempty"`
	Details  map[string]any `json:"details,omitempty"` // more machine-readable facts
	// Root is the data dir Path is relative to, set when a run has
	// several targets (scan A B), each with its own data dir.
	Root string `json:"root,omitempty"`
}

// File ends (docs/cli.md, `file.end`).
const (
	EndBlank   = "blank"   // RocketMQ BLANK end-of-file record
	EndZero    = "zero"    // zero fill after the last record
	EndEOF     = "eof"     // the last record ends exactly at end of file
	EndTorn    = "torn"    // a record cut short by end of file
	EndGarbage = "garbage" // bytes that are not a record
	EndShort   = "short"   // file shorter than its mapped size
)

// File summarises one scanned file.
type File struct {
	Path         string `json:"path"`
	Kind         string `json:"kind,omitempty"` // commitlog, consumequeue, index, rdq, qi, qs, idx, ...
	Size         int64  `json:"size"`
	BytesScanned int64  `json:"bytes_scanned"`
	Records      int    `json:"records"`
	FirstValid   int64  `json:"first_valid"`    // offset of the first valid record, -1 if none
	LastValid    int64  `json:"last_valid"`     // offset of the last valid record, -1 if none
	ValidEnd     int64  `json:"valid_end"`      // where the data a correct recovery keeps ends
	End          string `json:"end"`            // blank | zero | eof | torn | garbage | short
	Root         string `json:"root,omitempty"` // the data dir Path is relative to, when a run has several targets
}

// Options are shared by every scanner.
type Options struct {
	// Records, when non-nil, receives every decoded record in file order
	// (one value per record, a struct with JSON tags). It is called from
	// one goroutine at a time.
	Records func(rec any) error
	// Jobs is how many files are scanned at once; <= 0 means one.
	Jobs int
	// Progress, when non-nil, is told how many bytes were just read.
	// It may be called from several goroutines.
	Progress func(n int64)
}

// Result is what a scan found. Files and Findings are in a deterministic
// order whatever Jobs is.
type Result struct {
	Store        string         `json:"store"`            // rocketmq | rabbitmq
	Layout       map[string]any `json:"layout,omitempty"` // what was detected, and from which files
	Files        []File         `json:"files"`
	Findings     []Finding      `json:"findings"`
	BytesScanned int64          `json:"bytes_scanned"`
	// RecoveryEnd is, for RocketMQ, the physical offset where a correct
	// recovery (with the rocketmq #10017 offset check) stops.
	RecoveryEnd *int64 `json:"recovery_end,omitempty"`
	// Queues is filled by RabbitMQ verify: one entry per queue.
	Queues []Queue `json:"queues,omitempty"`
	// QueueLines are verify's queue lines of the other queue types
	// (streams, quorum queues): each marshals to an object with Queue's
	// required fields and a queue_type. They follow Queues.
	QueueLines []any `json:"queue_lines,omitempty"`
	// Extra carries store-specific summary facts (merged into `summary`).
	Extra map[string]any `json:"extra,omitempty"`
	// Assumptions say what the scan assumed where the files lack context
	// (the broker version, queue references), and why.
	Assumptions []string `json:"assumptions,omitempty"`
	// Incomplete is set when an I/O or internal error stopped part of the
	// work; Errors says what.
	Incomplete bool     `json:"incomplete"`
	Errors     []string `json:"errors,omitempty"`

	mu      sync.Mutex
	closers []func() error
}

// OnClose registers fn for Close: what the result's values still read
// from (a temp file of spilled queue lines) until the report is written.
func (r *Result) OnClose(fn func() error) {
	r.mu.Lock()
	r.closers = append(r.closers, fn)
	r.mu.Unlock()
}

// Close runs the OnClose functions, once, and returns the first error.
// The values they read from must not be used afterwards.
func (r *Result) Close() error {
	r.mu.Lock()
	fns := r.closers
	r.closers = nil
	r.mu.Unlock()
	var first error
	for _, fn := range fns {
		if err := fn(); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// Add appends findings; safe for concurrent use.
func (r *Result) Add(f ...Finding) {
	r.mu.Lock()
	r.Findings = append(r.Findings, f...)
	r.mu.Unlock()
}

// Take adds fs, which the result takes over (the caller must not use fs
// afterwards): the first list is kept as it is rather than copied, since
// findings can be most of a scan's heap. Safe for concurrent use.
func (r *Result) Take(fs []Finding) {
	r.mu.Lock()
	if r.Findings == nil {
		r.Findings = fs
	} else {
		r.Findings = append(r.Findings, fs...)
	}
	r.mu.Unlock()
}

// Assume records an assumption once ("" is ignored); safe for concurrent use.
func (r *Result) Assume(a string) {
	if a == "" {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, x := range r.Assumptions {
		if x == a {
			return
		}
	}
	r.Assumptions = append(r.Assumptions, a)
}

// Merge adds o's files, findings, queues, bytes, layout, extra facts,
// assumptions and errors to r (one target read by several scanners).
// r's Store stays.
func (r *Result) Merge(o *Result) {
	if o == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.Files = append(r.Files, o.Files...)
	r.Findings = append(r.Findings, o.Findings...)
	r.Queues = append(r.Queues, o.Queues...)
	r.QueueLines = append(r.QueueLines, o.QueueLines...)
	r.closers = append(r.closers, o.closers...)
	r.BytesScanned += o.BytesScanned
	for k, v := range o.Layout {
		if r.Layout == nil {
			r.Layout = map[string]any{}
		}
		r.Layout[k] = v
	}
	for k, v := range o.Extra {
		if r.Extra == nil {
			r.Extra = map[string]any{}
		}
		r.Extra[k] = v
	}
	for _, a := range o.Assumptions {
		if !slices.Contains(r.Assumptions, a) {
			r.Assumptions = append(r.Assumptions, a)
		}
	}
	if o.RecoveryEnd != nil && r.RecoveryEnd == nil {
		r.RecoveryEnd = o.RecoveryEnd
	}
	if o.Incomplete {
		r.Incomplete = true
		r.Errors = append(r.Errors, o.Errors...)
	}
}

// Fail marks the result incomplete with err; safe for concurrent use.
func (r *Result) Fail(err error) {
	r.mu.Lock()
	r.Incomplete = true
	r.Errors = append(r.Errors, err.Error())
	r.mu.Unlock()
}

// SortFindings orders findings by path, offset and code, so output does
// not depend on scheduling.
func (r *Result) SortFindings() {
	sort.SliceStable(r.Findings, func(i, j int) bool {
		a, b := r.Findings[i], r.Findings[j]
		if a.Path != b.Path {
			return a.Path < b.Path
		}
		if a.Offset != b.Offset {
			return a.Offset < b.Offset
		}
		return a.Code < b.Code
	})
}

// Counts returns findings per severity name and per code.
func (r *Result) Counts() (bySeverity map[string]int, byCode map[string]int) {
	bySeverity = map[string]int{"error": 0, "warning": 0, "info": 0}
	byCode = map[string]int{}
	for _, f := range r.Findings {
		bySeverity[f.Severity.String()]++
		byCode[f.Code]++
	}
	return bySeverity, byCode
}

// Worst returns the highest severity present and whether any finding exists.
func (r *Result) Worst() (Severity, bool) {
	if len(r.Findings) == 0 {
		return Info, false
	}
	w := Info
	for _, f := range r.Findings {
		if f.Severity > w {
			w = f.Severity
		}
	}
	return w, true
}

// Queue is the RabbitMQ `queue` record of verify: one per queue, what its
// index holds and what the broker's next start will keep and drop.
type Queue struct {
	VHost   string `json:"vhost"`
	Queue   string `json:"queue"`
	Dir     string `json:"dir"`     // hashed queue dir name
	Index   string `json:"index"`   // v1, v2 or v1+v2
	Entries int    `json:"entries"` // live index entries
	Keep    int    `json:"keep"`    // messages the next start keeps
	Drop    int    `json:"drop"`    // messages the next start drops
	// Unconfirmed counts the dropped entries whose message no .rdq holds
	// after an unclean stop: normally publishes that were never confirmed
	// (part of Drop, not lost).
	Unconfirmed int `json:"unconfirmed"`
	// Unknown counts entries whose fate cannot be told: their message is
	// in no readable .rdq, and some .rdq (WaitsOn) could not be read.
	Unknown int            `json:"unknown"`
	WaitsOn []string       `json:"waits_on,omitempty"` // the unread files the unknown entries wait on
	AtRisk  map[string]int `json:"at_risk"`            // version range -> messages a scanner bug there would lose
	// DropMsgIDs and AtRiskMsgIDs name the messages (32 hex digits).
	DropMsgIDs   MsgIDs            `json:"drop_msg_ids,omitzero"`
	AtRiskMsgIDs map[string]MsgIDs `json:"at_risk_msg_ids,omitempty"`
}
