package report

import (
	"fmt"
	"sort"
	"strings"

	"github.com/fatih/color"

	"github.com/storectl/storectl/pkg/scan"
)

// The text report answers first. Lines 1-5: the verdict, what is lost or
// at risk (messages, bytes), and the next command(s) to run, taken from
// the findings' repair. Then the details, laid out to the terminal width:
// findings grouped by code and file (count, offset range, first ids; -v
// lists each), and for every damaged file a one-line map of where in it
// the valid records, zero fill, stale, torn and garbage regions lie.
// Every line fits the width (long names wrap, never run past it).

// DefaultWidth is the width of text reports off a terminal.
const DefaultWidth = 80

// minWidth is the narrowest layout.
const minWidth = 40

func (e *textEmitter) width() int {
	if e.st.Width <= 0 {
		return DefaultWidth
	}
	return max(e.st.Width, minWidth)
}

// line writes s wrapped to the width: at spaces where it can, hard where
// a word (a long path) alone is wider; continuation lines are indented.
func (e *textEmitter) line(s string) {
	for _, l := range wrapWidth(s, e.width(), "    ") {
		fmt.Fprintln(e.w, l)
	}
}

// parts writes parts joined by sep, breaking lines between parts (a part
// is wrapped inside only when it alone is wider than a line).
func (e *textEmitter) parts(parts []string, sep string) {
	cur := ""
	for _, p := range parts {
		switch {
		case cur == "":
			cur = p
		case len([]rune(cur+sep+p)) <= e.width():
			cur += sep + p
		default:
			e.line(cur)
			cur = "    " + p
		}
	}
	if cur != "" {
		e.line(cur)
	}
}

// wrapWidth breaks s into lines of at most width runes: at spaces, and
// inside a word only when the word alone is wider than a line.
func wrapWidth(s string, width int, indent string) []string {
	var out []string
	lead := len(s) - len(strings.TrimLeft(s, " "))
	cur := []rune(s[:lead])
	start := len(cur) // runes of the line before its first word
	for _, w := range strings.Fields(s) {
		r := []rune(w)
		if len(cur) > start && len(cur)+1+len(r) > width {
			out = append(out, string(cur))
			cur = []rune(indent)
			start = len(cur)
		}
		if len(cur) > start {
			cur = append(cur, ' ')
		}
		for len(cur)+len(r) > width { // a word wider than the room
			k := width - len(cur)
			cur = append(cur, r[:k]...)
			out = append(out, string(cur))
			r = r[k:]
			cur = []rune(indent)
			start = len(cur)
		}
		cur = append(cur, r...)
	}
	if len(cur) > start || len(out) == 0 {
		out = append(out, string(cur))
	}
	return out
}

// firstLines is s wrapped to the width, at most n lines (the last one
// cut with "…" when more would follow).
func firstLines(s string, width, n int) []string {
	ls := wrapWidth(s, width, "    ")
	if len(ls) > n {
		ls = ls[:n]
		r := []rune(ls[n-1])
		if len(r) >= width {
			r = r[:width-1]
		}
		ls[n-1] = string(r) + "…"
	}
	return ls
}

// head writes lines 1-5: verdict, loss, next commands.
func (e *textEmitter) head(s Summary) {
	word, attr := "clean", color.FgGreen
	switch {
	case s.Incomplete || s.ExitCode == 3 || s.ExitCode == 130:
		word, attr = "incomplete", color.FgRed
	case s.ExitCode == 1 && s.Counts["error"] == 0:
		word, attr = "problems found", color.FgYellow
	case s.ExitCode != 0:
		word, attr = "problems found", color.FgRed
	case s.Counts["error"]+s.Counts["warning"] > 0:
		word, attr = "no new problems", color.FgYellow // exit 0 with findings: --fail-on error, or --fail-on new
	}
	switch s.ExitCode {
	case 2:
		word = "usage error"
	case 4:
		word = "refused"
	case 5:
		word = "apply failed"
	}
	v := fmt.Sprintf("%s: %s (exit %d)", word, e.verdictText(s), s.ExitCode)
	// The verdict gets two lines at most, what was not checked one and the
	// loss what is left of four, so the first next command is on line 5
	// at the latest at any width; what they cut is repeated in full below.
	used := 0
	for i, l := range firstLines(v, e.width(), 2) {
		if i == 0 {
			e.color(attr).Fprint(e.w, l)
			fmt.Fprintln(e.w)
		} else {
			fmt.Fprintln(e.w, l)
		}
		used++
	}
	e.cut = len(wrapWidth(v, e.width(), "    ")) > 2
	if nc := e.notChecked(); nc != "" {
		l := firstLines(nc, e.width(), 1)[0]
		e.color(color.FgYellow).Fprint(e.w, l)
		fmt.Fprintln(e.w)
		used++
	}
	loss := e.lossLine(s)
	for _, l := range firstLines(loss, e.width(), 4-used) {
		fmt.Fprintln(e.w, l)
	}
	e.cut = e.cut || len(wrapWidth(loss, e.width(), "    ")) > 4-used
	next := e.nextCommands(s)
	if len(next) == 0 {
		next = []string{"nothing to do"}
	}
	for _, n := range next {
		cmd, why, _ := strings.Cut(n, "   # ")
		if why != "" && len("next: "+n) <= e.width() {
			cmd += "   # " + why
		}
		e.line("next: " + cmd)
	}
}

// verdictText is the verdict's words: the command's own, else the counts.
func (e *textEmitter) verdictText(s Summary) string {
	v := Escape(s.Verdict)
	if v == "" {
		v = fmt.Sprintf("%d error(s), %d warning(s), %d info", s.Counts["error"], s.Counts["warning"], s.Counts["info"])
		if s.Baseline != nil && s.Baseline.Previous {
			v += fmt.Sprintf("; %d new since the baseline", s.Baseline.New)
		}
	}
	return v
}

// notChecked is the coverage line of what holds messages and was not
// read ("" when everything was): part of the answer, since the verdict
// does not cover it.
func (e *textEmitter) notChecked() string {
	if e.run == nil {
		return ""
	}
	missed, _, _ := coverageParts(e.run)
	if len(missed) == 0 {
		return ""
	}
	return "NOT CHECKED, holds messages: " + strings.Join(missed, "; ")
}

// isCoverage: a finding about what was not read, not about damage.
func isCoverage(code string) bool { return strings.Contains(code, ".coverage.") }

// isUnread: a finding about bytes the run could not read (a file it
// could not open or read to its end, and what waits on it: the
// "Unknown is not lost" codes), whose length is bytes not read, not
// bytes damaged.
func isUnread(code string) bool {
	return strings.HasSuffix(code, ".unknown") || strings.HasSuffix(code, "-unknown") || strings.HasSuffix(code, ".unreadable")
}

// lossLine says what is lost or at risk: the messages the findings name
// and the bytes of their regions; RabbitMQ adds what the next start drops.
//
// A finding about many messages (a RabbitMQ scanner hazard) names its
// first victim and counts them all (details.live_victim_count: the ones
// a queue references, else victim_count). The hazards of one file can
// lose the same records (a generation-1 stop and a zero-hole misread),
// so their count is a range: at least the largest of each file's counts,
// at most their sum. The line named the first victims only: "4
// message(s)" for four generation-1 stops that miss 178,399 messages.
func (e *textEmitter) lossLine(s Summary) string {
	ids := map[string]bool{}
	var bytes int64
	codes := map[string]int{}
	most := map[string]int{} // file -> its largest victim count
	var victims int
	var unread int64
	unreadCodes := map[string]int{}
	for _, f := range e.findings {
		if f.Severity == scan.Info || isCoverage(f.Code) {
			continue
		}
		if isUnread(f.Code) {
			unread += f.Length
			unreadCodes[f.Code]++
			continue
		}
		if n, ok := victimCount(f.Details); ok {
			most[f.Path] = max(most[f.Path], n)
			victims += n
		} else if f.MsgID != "" {
			ids[f.MsgID] = true
		}
		bytes += f.Length
		codes[f.Code]++
	}
	least := 0
	for _, n := range most {
		least += n
	}
	drop, unconfirmed := 0, 0
	for _, q := range e.queues {
		if n, ok := q["drop"].(float64); ok {
			drop += int(n)
		}
		if n, ok := q["unconfirmed"].(float64); ok {
			unconfirmed += int(n)
		}
	}
	unknown := ""
	if len(unreadCodes) > 0 {
		unknown = "unknown"
		if unread > 0 {
			unknown += fmt.Sprintf(": %d byte(s) not read", unread)
		}
		unknown += " (" + codeCounts(unreadCodes) + ")"
	}
	if len(codes) == 0 && drop == 0 {
		switch {
		case unknown != "":
			return "lost or at risk: " + unknown + "; nothing else"
		case s.Incomplete:
			return "lost or at risk: unknown (the run did not read everything; see below)"
		}
		return "lost or at risk: nothing"
	}
	var parts []string
	if len(ids) > 0 {
		parts = append(parts, fmt.Sprintf("%d message(s)", len(ids)))
	}
	switch {
	case victims > least:
		parts = append(parts, fmt.Sprintf("%d-%d message(s) a broker scanner misses", least, victims))
	case victims > 0:
		parts = append(parts, fmt.Sprintf("%d message(s) a broker scanner misses", victims))
	}
	if bytes > 0 {
		parts = append(parts, fmt.Sprintf("%d byte(s) of damaged regions", bytes))
	}
	switch {
	case drop > 0 && unconfirmed == drop:
		parts = append(parts, fmt.Sprintf("the next start drops %d message(s), all publishes never confirmed", drop))
	case unconfirmed > 0:
		parts = append(parts, fmt.Sprintf("the next start drops %d message(s), %d of them publishes never confirmed", drop, unconfirmed))
	case drop > 0:
		parts = append(parts, fmt.Sprintf("the next start drops %d message(s)", drop))
	}
	if len(parts) == 0 {
		parts = append(parts, "no message named")
	}
	line := "lost or at risk: " + strings.Join(parts, ", ") + " (" + codeCounts(codes) + ")"
	if unknown != "" {
		line += "; beyond that " + unknown
	}
	return line
}

// codeCounts lists codes with their counts ("a ×2, b ×1"), sorted.
func codeCounts(codes map[string]int) string {
	var cs []string
	for _, c := range sortedKeys(codes) {
		cs = append(cs, fmt.Sprintf("%s ×%d", Escape(c), codes[c]))
	}
	return strings.Join(cs, ", ")
}

// nextCommands are the exact commands to run next, from the findings'
// repair (verify, scan), the plan (a dry run), or the backup (an apply).
func (e *textEmitter) nextCommands(s Summary) []string {
	r := e.run
	if r == nil {
		return nil
	}
	dir := ShellQuote(r.DataDir)
	switch {
	case s.BackupDir != "":
		return []string{UndoCommand(s.BackupDir) + "   # to put the apply back"}
	case r.DryRun != nil && *r.DryRun && s.Actions > 0 && r.Command != "undo":
		return []string{fmt.Sprintf("storectl %s --apply %s   # backup first, asks before writing", r.Command, dir)}
	case r.Command == "undo" && s.Actions > 0 && s.ExitCode == 1:
		return []string{fmt.Sprintf("storectl undo %s --apply", ShellQuote(firstArg(r)))}
	case r.Command != "verify" && r.Command != "scan":
		return nil
	}
	repairs := map[string]bool{}
	salvage := false
	for _, f := range e.findings {
		if f.Severity == scan.Info || isCoverage(f.Code) {
			continue
		}
		repairs[f.Repair] = true
		salvage = salvage || salvageable(f.Code)
	}
	var out []string
	if salvage {
		sel := "at-risk"
		if r.Store == "rocketmq" {
			sel = "after-corruption"
		}
		out = append(out, fmt.Sprintf("storectl salvage %s --select %s --out %s   # copy the messages out first", dir, sel, ShellQuote(r.DataDir+".salvage")))
	}
	if repairs[scan.RepairTruncate] {
		out = append(out, fmt.Sprintf("storectl truncate %s   # dry run: the plan, nothing written", dir))
	}
	if repairs[scan.RepairRebuildIndex] {
		out = append(out, fmt.Sprintf("storectl rebuild-index %s   # dry run: the plan", dir))
	}
	if len(out) == 0 && len(repairs) > 0 {
		out = append(out, "no storectl repair applies; see the findings below")
	}
	return out
}

// salvageable: findings whose messages salvage can still copy out before
// a broker (or a repair) loses them: scanner misreads (RabbitMQ at-risk)
// and valid records past a bad region (after-corruption).
func salvageable(code string) bool {
	for _, k := range []string{"misread", "off-by-nine", "gen1", "scanner-crash", ".salvage", "after-corruption"} {
		if strings.Contains(code, k) {
			return true
		}
	}
	return false
}

func firstArg(r *Run) string {
	if len(r.Args) > 0 {
		return r.Args[0]
	}
	return r.DataDir
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// findingGroup is the findings of one code in one file.
type findingGroup struct {
	sev      scan.Severity
	code     string
	path     string
	n        int
	lo, hi   int64
	ids      []string
	first    string
	distinct int
}

// groups groups fs by severity, code and path, worst first.
func groups(fs []scan.Finding) []*findingGroup {
	byKey := map[string]*findingGroup{}
	var out []*findingGroup
	for _, f := range fs {
		k := fmt.Sprintf("%d\x00%s\x00%s", f.Severity, f.Code, f.Path)
		g := byKey[k]
		if g == nil {
			g = &findingGroup{sev: f.Severity, code: f.Code, path: f.Path, lo: f.Offset, hi: f.Offset + f.Length, first: f.Message}
			byKey[k] = g
			out = append(out, g)
		}
		g.n++
		g.lo, g.hi = min(g.lo, f.Offset), max(g.hi, f.Offset+f.Length)
		if f.MsgID != "" {
			g.distinct++
			if len(g.ids) < 3 {
				g.ids = append(g.ids, f.MsgID)
			}
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].sev != out[j].sev {
			return out[i].sev > out[j].sev
		}
		if out[i].code != out[j].code {
			return out[i].code < out[j].code
		}
		return out[i].path < out[j].path
	})
	return out
}

// writeFindings writes the findings: one line per group (and its first
// message), or with -v every finding.
func (e *textEmitter) writeFindings() {
	var shown []scan.Finding
	hidden := map[string]int{}
	for _, f := range e.findings {
		if f.Severity == scan.Info && !e.st.Verbose {
			hidden[f.Code]++
			continue
		}
		shown = append(shown, f)
	}
	if len(shown) > 0 {
		fmt.Fprintln(e.w)
		if e.st.Verbose {
			e.line(fmt.Sprintf("findings (%d):", len(shown)))
			for _, f := range shown {
				s := fmt.Sprintf("  %-7s %s %s@%d", f.Severity, Escape(f.Code), Escape(f.Path), f.Offset)
				if f.Length > 0 {
					s += fmt.Sprintf("+%d", f.Length)
				}
				if f.MsgID != "" {
					s += " msg " + Escape(f.MsgID)
				}
				if f.Baseline == BaselineNew {
					s += " NEW"
				}
				e.line(s + ": " + Escape(f.Message))
			}
		} else {
			gs := groups(shown)
			e.line(fmt.Sprintf("findings (%d, in %d group(s) by code and file; -v lists each):", len(shown), len(gs)))
			for _, g := range gs {
				s := fmt.Sprintf("  %-7s ×%d %s %s", g.sev, g.n, Escape(g.code), Escape(g.path))
				switch {
				case g.hi > g.lo:
					s += fmt.Sprintf(" @%d-%d", g.lo, g.hi)
				default:
					s += fmt.Sprintf(" @%d", g.lo)
				}
				if len(g.ids) > 0 {
					s += " msg " + strings.Join(EscapeAll(g.ids), ", ")
					if g.distinct > len(g.ids) {
						s += fmt.Sprintf(", +%d", g.distinct-len(g.ids))
					}
				}
				e.line(s)
				e.line("      " + Escape(g.first))
			}
		}
	}
	if len(hidden) > 0 {
		var parts []string
		for _, c := range sortedKeys(hidden) {
			parts = append(parts, fmt.Sprintf("%s ×%d", Escape(c), hidden[c]))
		}
		fmt.Fprintln(e.w)
		e.line("info findings not listed (use -v or -o jsonl): " + strings.Join(parts, ", "))
	}
}

// Map cells, worst last (a cell shows the worst region it covers).
const (
	mapUnknown = ' '
	mapValid   = '='
	mapZero    = '0'
	mapStale   = 'S'
	mapTorn    = 'T'
	mapGarbage = 'X'
)

var mapRank = map[rune]int{mapUnknown: 0, mapValid: 1, mapZero: 2, mapStale: 3, mapGarbage: 4, mapTorn: 5}

// regionClass maps a finding code to a map cell.
func regionClass(code string) rune {
	switch {
	case strings.Contains(code, "stale"):
		return mapStale
	case strings.Contains(code, "torn") || strings.Contains(code, "short"):
		return mapTorn
	case strings.Contains(code, "zero") || strings.Contains(code, "hole") || strings.Contains(code, "blank"):
		return mapZero
	}
	return mapGarbage
}

// writeMaps draws, for every file with a warning or error finding in it
// (or an end other than a clean one), where its regions lie. A finding
// about what was not read (isUnread) is not damage: it neither marks a
// file damaged nor paints its region X.
func (e *textEmitter) writeMaps() {
	bad := map[string][]scan.Finding{}
	for _, f := range e.findings {
		if f.Severity != scan.Info && !isUnread(f.Code) {
			bad[f.Path] = append(bad[f.Path], f)
		}
	}
	var files []scan.File
	for _, f := range e.files {
		if len(bad[f.Path]) > 0 || f.End == scan.EndTorn || f.End == scan.EndGarbage || f.End == scan.EndShort {
			if f.Size > 0 {
				files = append(files, f)
			}
		}
	}
	if len(files) == 0 {
		return
	}
	fmt.Fprintln(e.w)
	cells := e.width() - 4 // "  [" + cells + "]"
	e.line(fmt.Sprintf("file maps (%d damaged file(s); = valid, 0 zero fill/hole, S stale, T torn, X garbage/corrupt, blank not decoded):", len(files)))
	const maxMaps = 20
	for i, f := range files {
		if i == maxMaps {
			e.line(fmt.Sprintf("  (%d more damaged file(s); -o json lists every file)", len(files)-maxMaps))
			break
		}
		e.line(fmt.Sprintf("  %s (%s, %d records, end %s)", Escape(f.Path), humanBytes(f.Size), f.Records, orDash(f.End)))
		fmt.Fprintf(e.w, "  [%s]\n", fileMap(f, bad[f.Path], cells))
	}
}

// fileMap is f's map in cells characters: valid records up to ValidEnd,
// then what the file's end says, then the findings' regions over them.
func fileMap(f scan.File, fs []scan.Finding, cells int) string {
	m := make([]rune, cells)
	for i := range m {
		m[i] = mapUnknown
	}
	var over []rune // the findings' layer, over what the file's end says
	paint := func(lo, hi int64, c rune) {
		m := m
		if over != nil {
			m = over
		}
		if hi <= lo || f.Size <= 0 {
			return
		}
		a := int(lo * int64(cells) / f.Size)
		b := int((hi*int64(cells) + f.Size - 1) / f.Size)
		for i := max(a, 0); i < min(b, cells); i++ {
			if mapRank[c] > mapRank[m[i]] {
				m[i] = c
			}
		}
	}
	valid := f.ValidEnd
	if valid <= 0 && f.Records > 0 && f.LastValid >= 0 {
		valid = f.LastValid + 1
	}
	paint(0, valid, mapValid)
	switch f.End {
	case scan.EndZero, scan.EndBlank, scan.EndShort:
		paint(valid, f.Size, mapZero)
	case scan.EndTorn:
		paint(valid, f.Size, mapTorn)
	case scan.EndGarbage:
		paint(valid, f.Size, mapGarbage)
	}
	over = make([]rune, cells)
	for i := range over {
		over[i] = mapUnknown
	}
	for _, g := range fs {
		n := max(g.Length, 1)
		paint(g.Offset, g.Offset+n, regionClass(g.Code))
	}
	for i, c := range over {
		if c != mapUnknown {
			m[i] = c
		}
	}
	return string(m)
}

// victimCount is how many messages a finding about many says it loses:
// details.live_victim_count, else details.victim_count (a number, as Go
// or as decoded JSON).
func victimCount(d map[string]any) (int, bool) {
	for _, k := range []string{"live_victim_count", "victim_count"} {
		switch n := d[k].(type) {
		case int:
			return n, true
		case int64:
			return int(n), true
		case float64:
			return int(n), true
		}
	}
	return 0, false
}
