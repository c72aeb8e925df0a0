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
	cut      bool // the head cut the verdict or the loss line short
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
	e.head(s) // lines 1-5: the verdict, the loss, the next commands
	e.parts(e.totals(s), " · ")
	for _, t := range s.Targets { // one line per path of a multi-path run
		line := []string{fmt.Sprintf("%s (%s): %d error(s), %d warning(s), %d info", Escape(t.Path), t.Store, t.Counts["error"], t.Counts["warning"], t.Counts["info"]),
			fmt.Sprintf("%d file(s), %s scanned", t.Files, humanBytes(t.BytesScanned))}
		if t.RecoveryEnd != nil {
			line = append(line, fmt.Sprintf("recovery end %d", *t.RecoveryEnd))
		}
		if t.Incomplete {
			line = append(line, "INCOMPLETE")
		}
		e.parts(line, " · ")
	}
	if e.cut { // the head cut a line short: here it is whole
		e.line("verdict: " + e.verdictText(s))
		e.line(e.lossLine(s))
	}
	if r := e.run; r != nil {
		fmt.Fprintln(w)
		e.line(fmt.Sprintf("storectl %s: %s store at %s", Escape(r.Command), Escape(orDash(r.Store)), Escape(r.DataDir)))
		if len(r.DetectedFrom) > 0 {
			e.line("detected from: " + strings.Join(EscapeAll(r.DetectedFrom), ", "))
		}
		e.coverage(r, s.Assumptions)
		if r.Live {
			e.color(color.FgYellow).Fprintf(w, "%s\n", strings.Join(wrapWidth(fmt.Sprintf("WARNING: the broker looks live (%s); results may be inconsistent", strings.Join(EscapeAll(r.LiveReasons), "; ")), e.width(), "    "), "\n"))
		}
		if r.LiveUndecided {
			e.color(color.FgYellow).Fprintf(w, "WARNING: could not tell whether a broker uses the data dir (%s)\n", strings.Join(EscapeAll(r.LiveWarnings), "; "))
		}
	}
	if s.Incomplete && len(s.Errors) > 0 {
		fmt.Fprintln(w)
		for _, er := range s.Errors {
			e.line("error: " + Escape(er))
		}
	}
	e.writeFindings()
	e.writeMaps()
	if len(e.queues) > 0 {
		fmt.Fprintln(w)
		e.line("queues (what the next start keeps and drops):")
		for _, q := range e.queues {
			e.line("  " + queueLine(q))
		}
	}
	if len(e.actions) > 0 {
		fmt.Fprintln(w)
		e.line(fmt.Sprintf("actions (%d):", len(e.actions)))
		for _, a := range e.actions {
			e.line("  " + actionText(a))
		}
	}
	if len(e.files) > 0 {
		fmt.Fprintln(w)
		e.writeComponents()
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
	if bl := s.Baseline; bl != nil {
		fmt.Fprintln(w)
		e.writeBaseline(bl)
	}
	if s.BackupDir != "" {
		fmt.Fprintln(w)
		e.line("backup: " + Escape(s.BackupDir))
		e.line("undo:   " + UndoCommand(s.BackupDir))
	}
	return nil
}

// totals is the counts line under the head (the duration only on a
// terminal: text off a terminal is stable, for tickets and diffs).
func (e *textEmitter) totals(s Summary) []string {
	parts := []string{fmt.Sprintf("%d error(s), %d warning(s), %d info", s.Counts["error"], s.Counts["warning"], s.Counts["info"])}
	scanned := fmt.Sprintf("%d file(s), %s scanned", s.Files, humanBytes(s.BytesScanned))
	if e.st.TTY {
		scanned += fmt.Sprintf(" in %d ms", s.DurationMS)
	}
	parts = append(parts, scanned)
	if s.RecoveryEnd != nil {
		parts = append(parts, fmt.Sprintf("recovery end %d", *s.RecoveryEnd))
	}
	if s.Actions > 0 {
		parts = append(parts, fmt.Sprintf("%d action(s)", s.Actions))
	}
	return parts
}

// queueLine is one queue record in words.
func queueLine(q map[string]any) string {
	s := fmt.Sprintf("%s %s (%s): %s entries, keep %s, drop %s", cell(q["vhost"]), cell(q["queue"]), cell(q["dir"]), cell(q["entries"]), cell(q["keep"]), cell(q["drop"]))
	if u, ok := q["unconfirmed"]; ok && cell(u) != "0" {
		s += " (" + cell(u) + " never confirmed)"
	}
	if u, ok := q["unknown"]; ok && cell(u) != "0" {
		s += ", unknown " + cell(u)
	}
	if t, ok := q["type"]; ok && cell(t) != "classic" {
		s = cell(t) + " " + s
	}
	if ar, ok := q["at_risk"].(map[string]any); ok && len(ar) > 0 {
		var p []string
		for _, k := range sortedKeys(ar) {
			p = append(p, k+" "+cell(ar[k]))
		}
		s += "; at risk for " + strings.Join(p, ", ")
	}
	return s
}

// actionText is one action record in words.
func actionText(a map[string]any) string {
	s := fmt.Sprintf("%s %s %s", cell(a["status"]), cell(a["op"]), cell(a["path"]))
	if l, _ := a["length"].(float64); l > 0 {
		s += fmt.Sprintf(" @%s+%s", cell(a["offset"]), cell(a["length"]))
	}
	if n, ok := a["new_size"]; ok {
		s += " to " + cell(n) + " bytes"
	}
	if l, ok := a["lost"].(map[string]any); ok {
		if n, _ := l["records"].(float64); n > 0 {
			s += fmt.Sprintf("; loses %s record(s)", cell(l["records"]))
		}
	}
	if r, ok := a["reason"].(string); ok && r != "" {
		s += " (" + Escape(r) + ")"
	}
	if m, ok := a["message"].(string); ok && m != "" {
		s += ": " + Escape(m)
	}
	return s
}

// writeComponents writes one line per component (file kind and dir) with
// totals.
func (e *textEmitter) writeComponents() {
	type agg struct {
		files, records int
		size           int64
		ends           map[string]int
	}
	byKey := map[string]*agg{}
	var keys []string
	for _, f := range e.files {
		dir := path.Dir(f.Path)
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
		a.ends[f.End]++
	}
	e.line("files read:")
	for _, k := range keys {
		a := byKey[k]
		kind, dir, _ := strings.Cut(k, "\x00")
		var ends []string
		for _, en := range sortedKeys(a.ends) {
			ends = append(ends, fmt.Sprintf("%s=%d", orDash(en), a.ends[en]))
		}
		e.line(fmt.Sprintf("  %s %s: %d file(s), %d record(s), %s, ends %s", Escape(kind), Escape(dir), a.files, a.records, humanBytes(a.size), strings.Join(ends, " ")))
	}
}

// writeBaseline says what changed since the baseline run.
func (e *textEmitter) writeBaseline(bl *BaselineSummary) {
	if !bl.Previous {
		e.line(fmt.Sprintf("baseline %s: first run, %d finding(s) recorded as the baseline", Escape(bl.File), bl.New))
		return
	}
	e.line(fmt.Sprintf("baseline %s: %d new, %d persistent, %d resolved", Escape(bl.File), bl.New, bl.Persistent, bl.Resolved))
	for _, r := range bl.ResolvedFindings {
		e.line(fmt.Sprintf("  resolved: %s %s@%d", Escape(r.Code), Escape(r.Path), r.Offset))
	}
	if n := bl.Resolved - len(bl.ResolvedFindings); n > 0 {
		e.line(fmt.Sprintf("  (%d more resolved; see -o json)", n))
	}
	if bl.NotSaved != "" {
		e.line("  not saved as the next baseline: " + Escape(bl.NotSaved))
	}
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

// coverageParts sorts the run's components into what holds messages and
// was not read, what was read, and what else was not read.
func coverageParts(r *Run) (missed, read, other []string) {
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
	return missed, read, other
}

// coverage writes the run's coverage and assumption lines: what holds
// messages and was not read first, then what was read, then what else was
// not read, then what was assumed.
func (e *textEmitter) coverage(r *Run, found []string) {
	missed, read, other := coverageParts(r)
	read, none := e.partlyRead(r, read)
	if len(missed) > 0 {
		for _, l := range wrapWidth("NOT CHECKED, holds messages: "+strings.Join(missed, "; "), e.width(), "    ") {
			e.color(color.FgYellow).Fprint(e.w, l)
			fmt.Fprintln(e.w)
		}
	}
	if len(none) > 0 {
		for _, l := range wrapWidth("COULD NOT READ: "+strings.Join(dedupe(none), "; "), e.width(), "    ") {
			e.color(color.FgYellow).Fprint(e.w, l)
			fmt.Fprintln(e.w)
		}
	}
	if len(read) > 0 {
		e.line("checked: " + strings.Join(dedupe(read), ", "))
	}
	if len(other) > 0 {
		e.line("not read (no messages): " + strings.Join(other, ", "))
	}
	shown := found
	for _, a := range r.Assumptions {
		// The run's note on the broker version is the rule; what the files
		// showed (found) replaces it when there is one.
		if !(strings.HasPrefix(a, "broker version") && slices.ContainsFunc(found, func(f string) bool { return strings.HasPrefix(f, "broker version") })) {
			e.line("assumed: " + a)
		}
	}
	for _, a := range shown {
		e.line("assumed: " + a)
	}
}

// partlyRead marks, in read (coverageParts' checked component paths,
// in r.Components order), the components some file of which the run
// could not read (a finding of an unread file: isFileUnread), so that
// "checked:" does not claim what was not read: "queues (partly: 1 of 9
// file(s) not read)"; a component none of whose files could be read
// moves to none ("msg_store_transient: its 1 file(s)").
func (e *textEmitter) partlyRead(r *Run, read []string) (checked, none []string) {
	unread := map[string]bool{}
	for _, f := range e.findings {
		if isFileUnread(f.Code) && f.Path != "" {
			unread[f.Path] = true
		}
	}
	if len(unread) == 0 {
		return read, nil
	}
	k := 0
	for _, c := range r.Components {
		if !c.Checked {
			continue
		}
		where := read[k]
		k++
		n := 0
		for p := range unread {
			if c.Path == "." || p == c.Path || strings.HasPrefix(p, c.Path+"/") {
				n++
			}
		}
		switch {
		case n == 0:
			checked = append(checked, where)
		case n < c.Files:
			checked = append(checked, fmt.Sprintf("%s (partly: %d of %d file(s) not read)", where, n, c.Files))
		default:
			none = append(none, fmt.Sprintf("%s: its %d file(s)", where, n))
		}
	}
	return checked, none
}

// isFileUnread: a finding that a file (or dir) could not be read at all
// or to its end; the "Unknown is not lost" codes that wait on it are
// about files that were read.
func isFileUnread(code string) bool {
	return code == "storectl.file.not-regular" || (strings.HasSuffix(code, ".unreadable") && code != "rabbitmq.index.unreadable")
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
