package report

import (
	"encoding/json"
	"fmt"
	"io"
	"path"
	"slices"
	"sort"
	"strings"

	"github.com/fatih/color"
	"github.com/olekukonko/tablewriter"

	"github.com/storectl/storectl/pkg/scan"
)

// MaxTextRecords caps the record rows text output collects: text is for
// people, and a store can hold millions of records (use -o jsonl).
const MaxTextRecords = 100000

// textEmitter collects everything and renders tables at Summary. Cells
// are never colored (pipes and golden files stay clean); only the
// verdict line and the severity legend carry color.
type textEmitter struct {
	w        io.Writer
	st       Style
	done     bool
	run      *Run
	records  []map[string]any
	dropped  int
	files    []scan.File
	findings []scan.Finding
	queues   []map[string]any
	actions  []map[string]any
}

func newText(w io.Writer, st Style) *textEmitter { return &textEmitter{w: w, st: st} }

func (e *textEmitter) Run(r Run) error { e.run = &r; return nil }

func (e *textEmitter) Record(rec any) error {
	if len(e.records) >= MaxTextRecords {
		e.dropped++
		return nil
	}
	m, err := toMap(rec)
	e.records = append(e.records, m)
	return err
}

// File and Finding show a path with its target's root when a run has
// several targets (Root set), so two stores' files do not merge.
func (e *textEmitter) File(f scan.File) error {
	if f.Root != "" {
		f.Path = path.Join(f.Root, f.Path)
	}
	e.files = append(e.files, f)
	return nil
}

func (e *textEmitter) Finding(f scan.Finding) error {
	if f.Root != "" {
		f.Path = path.Join(f.Root, f.Path)
	}
	e.findings = append(e.findings, f)
	return nil
}
func (e *textEmitter) Done() bool { return e.done }

func (e *textEmitter) Queue(q any) error {
	if sq, ok := asQueue(q); ok {
		q = queueCounts(sq) // the table shows counts: no id lists (queue.go)
	}
	m, err := toMap(q)
	e.queues = append(e.queues, m)
	return err
}

func (e *textEmitter) Action(a any) error {
	m, err := toMap(a)
	e.actions = append(e.actions, m)
	return err
}

func toMap(v any) (map[string]any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	m := map[string]any{}
	return m, json.Unmarshal(b, &m)
}

func (e *textEmitter) color(attr color.Attribute) *color.Color {
	c := color.New(attr, color.Bold)
	if e.st.Color {
		c.EnableColor()
	} else {
		c.DisableColor()
	}
	return c
}

func (e *textEmitter) Summary(s Summary) error {
	e.done = true
	w := e.w
	if r := e.run; r != nil {
		fmt.Fprintf(w, "storectl %s: %s store at %s\n", Escape(r.Command), Escape(orDash(r.Store)), Escape(r.DataDir))
		if len(r.DetectedFrom) > 0 {
			fmt.Fprintf(w, "detected from: %s\n", strings.Join(EscapeAll(r.DetectedFrom), ", "))
		}
		e.coverage(w, r, s.Assumptions)
		if r.Live {
			e.color(color.FgYellow).Fprintf(w, "WARNING: the broker looks live (%s); results may be inconsistent\n", strings.Join(EscapeAll(r.LiveReasons), "; "))
		}
		if r.LiveUndecided {
			e.color(color.FgYellow).Fprintf(w, "WARNING: could not tell whether a broker uses the data dir (%s)\n", strings.Join(EscapeAll(r.LiveWarnings), "; "))
		}
	}
	if len(e.records) > 0 {
		fmt.Fprintln(w)
		if err := renderRecords(w, e.records); err != nil {
			return err
		}
		if e.dropped > 0 {
			fmt.Fprintf(w, "(%d more records not shown; use -o jsonl)\n", e.dropped)
		}
	}
	if len(e.files) > 0 {
		fmt.Fprintln(w)
		if err := renderComponents(w, e.files); err != nil {
			return err
		}
	}
	if len(e.queues) > 0 {
		fmt.Fprintln(w)
		if err := renderMaps(w, e.queues, []string{"vhost", "queue", "dir", "entries", "keep", "drop", "unknown", "at_risk"}); err != nil {
			return err
		}
	}
	if len(e.actions) > 0 {
		fmt.Fprintln(w)
		for _, a := range e.actions {
			if l, ok := a["lost"].(map[string]any); ok {
				if n, _ := l["records"].(float64); n > 0 {
					a["lost"] = fmt.Sprintf("%s record(s)", cell(l["records"]))
				} else {
					a["lost"] = "" // nothing lost (an undo, a rewrite of a gap)
				}
			}
			if m, ok := a["message"].(string); ok {
				a["message"] = escaped(wrap(Escape(m), 60))
			}
		}
		if err := renderMaps(w, e.actions, []string{"status", "op", "path", "offset", "length", "new_size", "bytes", "reason", "lost", "message"}); err != nil {
			return err
		}
	}
	shown, hidden := e.findings, map[string]int{}
	if !e.st.Verbose {
		shown = nil
		for _, f := range e.findings {
			if f.Severity == scan.Info {
				hidden[f.Code]++
			} else {
				shown = append(shown, f)
			}
		}
	}
	if len(shown) > 0 {
		fmt.Fprintln(w)
		if err := renderFindings(w, shown); err != nil {
			return err
		}
	}
	if len(hidden) > 0 {
		var parts []string
		for c, n := range hidden {
			parts = append(parts, fmt.Sprintf("%s ×%d", Escape(c), n))
		}
		sort.Strings(parts)
		fmt.Fprintf(w, "\ninfo findings not listed (use -v or -o jsonl): %s\n", strings.Join(parts, ", "))
	}
	if bl := s.Baseline; bl != nil {
		fmt.Fprintln(w)
		writeBaseline(w, bl)
	}
	if s.BackupDir != "" {
		fmt.Fprintf(w, "\nbackup: %s\nundo:   %s\n", Escape(s.BackupDir), UndoCommand(s.BackupDir))
	}
	fmt.Fprintln(w)
	return e.verdict(s)
}

// writeBaseline says what changed since the baseline run.
func writeBaseline(w io.Writer, bl *BaselineSummary) {
	if !bl.Previous {
		fmt.Fprintf(w, "baseline %s: first run, %d finding(s) recorded as the baseline\n", bl.File, bl.New)
		return
	}
	fmt.Fprintf(w, "baseline %s: %d new, %d persistent, %d resolved\n", bl.File, bl.New, bl.Persistent, bl.Resolved)
	for _, r := range bl.ResolvedFindings {
		fmt.Fprintf(w, "  resolved: %s %s@%d\n", r.Code, r.Path, r.Offset)
	}
	if n := bl.Resolved - len(bl.ResolvedFindings); n > 0 {
		fmt.Fprintf(w, "  (%d more resolved; see -o json)\n", n)
	}
	if bl.NotSaved != "" {
		fmt.Fprintf(w, "  not saved as the next baseline: %s\n", bl.NotSaved)
	}
}

func (e *textEmitter) verdict(s Summary) error {
	for _, t := range s.Targets {
		line := fmt.Sprintf("%s (%s): %d error(s), %d warning(s), %d info · %d file(s), %s scanned",
			Escape(t.Path), t.Store, t.Counts["error"], t.Counts["warning"], t.Counts["info"], t.Files, humanBytes(t.BytesScanned))
		if t.RecoveryEnd != nil {
			line += fmt.Sprintf(" · recovery end %d", *t.RecoveryEnd)
		}
		if t.Incomplete {
			line += " (INCOMPLETE)"
		}
		fmt.Fprintln(e.w, line)
	}
	parts := []string{fmt.Sprintf("%d error(s), %d warning(s), %d info", s.Counts["error"], s.Counts["warning"], s.Counts["info"])}
	parts = append(parts, fmt.Sprintf("%d file(s), %s scanned in %d ms", s.Files, humanBytes(s.BytesScanned), s.DurationMS))
	if s.RecoveryEnd != nil {
		parts = append(parts, fmt.Sprintf("recovery end %d", *s.RecoveryEnd))
	}
	if s.Actions > 0 {
		parts = append(parts, fmt.Sprintf("%d action(s)", s.Actions))
	}
	attr := color.FgGreen
	switch {
	case s.ExitCode == 1 && s.Counts["error"] == 0:
		attr = color.FgYellow
	case s.ExitCode != 0:
		attr = color.FgRed
	}
	v := Escape(s.Verdict)
	if v == "" {
		v = "clean"
		if s.ExitCode != 0 {
			v = "problems found"
		} else if s.Baseline != nil && s.Counts["error"]+s.Counts["warning"] > 0 {
			v = "no new problems (known ones persist)"
		}
	}
	if s.Incomplete {
		v += " (INCOMPLETE: " + strings.Join(EscapeAll(s.Errors), "; ") + ")"
	}
	if _, err := e.color(attr).Fprintf(e.w, "%s: %s (exit %d)", v, strings.Join(parts, " · "), s.ExitCode); err != nil {
		return err
	}
	_, err := fmt.Fprintln(e.w)
	return err
}

func renderFindings(w io.Writer, fs []scan.Finding) error {
	t := tablewriter.NewTable(w)
	t.Header("severity", "code", "path", "offset", "message")
	for _, f := range fs {
		msg := f.Message
		if f.Baseline == BaselineNew {
			msg = "NEW: " + msg
		}
		if f.MsgID != "" {
			msg += " [msg " + f.MsgID + "]"
		}
		if err := t.Append(f.Severity.String(), Escape(f.Code), Escape(f.Path), fmt.Sprint(f.Offset), wrap(Escape(msg), 72)); err != nil {
			return err
		}
	}
	return t.Render()
}

// renderComponents prints one row per component (file kind and
// directory) with totals, then one row per file that did not end cleanly.
func renderComponents(w io.Writer, files []scan.File) error {
	type agg struct {
		files, records int
		size, scanned  int64
		ends           map[string]int
	}
	byKey := map[string]*agg{}
	var keys []string
	for _, f := range files {
		dir := f.Path
		if i := strings.LastIndexByte(dir, '/'); i >= 0 {
			dir = dir[:i]
		} else {
			dir = "."
		}
		k := orDash(f.Kind) + "\x00" + dir
		a := byKey[k]
		if a == nil {
			a = &agg{ends: map[string]int{}}
			byKey[k] = a
			keys = append(keys, k)
		}
		a.files++
		a.records += f.Records
		a.size += f.Size
		a.scanned += f.BytesScanned
		a.ends[f.End]++
	}
	t := tablewriter.NewTable(w)
	t.Header("component", "dir", "files", "records", "size", "ends")
	for _, k := range keys {
		a := byKey[k]
		kind, dir, _ := strings.Cut(k, "\x00")
		var ends []string
		for e, n := range a.ends {
			ends = append(ends, fmt.Sprintf("%s=%d", orDash(e), n))
		}
		sort.Strings(ends)
		if err := t.Append(Escape(kind), Escape(dir), fmt.Sprint(a.files), fmt.Sprint(a.records), humanBytes(a.size), strings.Join(ends, " ")); err != nil {
			return err
		}
	}
	return t.Render()
}

var recordColumns = []string{"path", "offset", "size", "msg_id", "topic", "queue_id", "queue_offset", "tags", "keys", "body_size", "exchange", "routing_keys", "payload_size", "referenced_by"}

func renderRecords(w io.Writer, recs []map[string]any) error {
	var cols []string
	for _, c := range recordColumns {
		if _, ok := recs[0][c]; ok {
			cols = append(cols, c)
		}
	}
	return renderMaps(w, recs, cols)
}

func renderMaps(w io.Writer, rows []map[string]any, cols []string) error {
	var use []string
	for _, c := range cols {
		for _, r := range rows {
			if _, ok := r[c]; ok {
				use = append(use, c)
				break
			}
		}
	}
	if len(use) == 0 {
		return nil
	}
	t := tablewriter.NewTable(w)
	hdr := make([]any, len(use))
	for i, c := range use {
		hdr[i] = c
	}
	t.Header(hdr...)
	for _, r := range rows {
		cells := make([]any, len(use))
		for i, c := range use {
			cells[i] = cell(r[c])
		}
		if err := t.Append(cells...); err != nil {
			return err
		}
	}
	return t.Render()
}

// escaped is a cell already escaped (and perhaps wrapped on purpose):
// cell prints it as it is.
type escaped string

// cell renders one table cell; every string in it is escaped (Escape).
func cell(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case escaped:
		return string(x)
	case string:
		return Escape(x)
	case float64:
		return fmt.Sprintf("%.0f", x)
	case []any:
		s := make([]string, len(x))
		for i, e := range x {
			s[i] = cell(e)
		}
		return strings.Join(s, ",")
	case map[string]any:
		s := make([]string, 0, len(x))
		for k, v := range x {
			s = append(s, Escape(k)+": "+cell(v))
		}
		sort.Strings(s)
		return strings.Join(s, "\n")
	default:
		b, _ := json.Marshal(x)
		return string(b)
	}
}

// coverage writes the run's coverage and assumption lines: what holds
// messages and was not read first, then what was read, then what else was
// not read, then what was assumed.
func (e *textEmitter) coverage(w io.Writer, r *Run, found []string) {
	var missed, read, other []string
	for _, c := range r.Components {
		where := c.Path
		if where == "." {
			where = "(data dir)"
		}
		switch {
		case c.Checked:
			read = append(read, where)
		case c.HoldsMessages:
			missed = append(missed, fmt.Sprintf("%s %s in %d file(s) (%s)", where, humanBytes(c.Bytes), c.Files, c.What))
		default:
			name := strings.TrimPrefix(c.Name, r.Store+".")
			if c.Path != "." && path.Base(c.Path) != name {
				name += " in " + c.Path
			}
			other = append(other, name)
		}
	}
	if len(missed) > 0 {
		e.color(color.FgYellow).Fprintf(w, "NOT CHECKED, holds messages: %s\n", strings.Join(missed, "; "))
	}
	if len(read) > 0 {
		fmt.Fprintf(w, "checked: %s\n", strings.Join(dedupe(read), ", "))
	}
	if len(other) > 0 {
		fmt.Fprintf(w, "not read (no messages): %s\n", strings.Join(other, ", "))
	}
	shown := found
	for _, a := range r.Assumptions {
		// The run's note on the broker version is the rule; what the files
		// showed (found) replaces it when there is one.
		if !(strings.HasPrefix(a, "broker version") && slices.ContainsFunc(found, func(f string) bool { return strings.HasPrefix(f, "broker version") })) {
			fmt.Fprintf(w, "assumed: %s\n", a)
		}
	}
	for _, a := range shown {
		fmt.Fprintf(w, "assumed: %s\n", a)
	}
}

// dedupe drops repeats from a sorted-or-not list, keeping the order.
func dedupe(xs []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, x := range xs {
		if !seen[x] {
			seen[x] = true
			out = append(out, x)
		}
	}
	return out
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

// wrap breaks s into lines of at most width runes at spaces.
func wrap(s string, width int) string {
	var b strings.Builder
	n := 0
	for i, word := range strings.Fields(s) {
		if i > 0 {
			if n+1+len(word) > width {
				b.WriteByte('\n')
				n = 0
			} else {
				b.WriteByte(' ')
				n++
			}
		}
		b.WriteString(word)
		n += len(word)
	}
	return b.String()
}
