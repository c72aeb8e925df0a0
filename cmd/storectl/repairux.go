package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/storectl/storectl/pkg/repair"
	"github.com/storectl/storectl/pkg/report"
)

// What makes a repair something an operator can follow: the plan in front
// of the question that applies it, and after an apply the backup dir and
// the exact undo command; an undo plan that says what it puts back.

// printPlan writes the plan, one line per action, where the prompt goes
// (stderr): the question is asked about something on the screen.
func printPlan(w io.Writer, p *repair.Plan) {
	fmt.Fprintf(w, "Plan for %s: %d action(s)\n", report.Escape(p.DataDir), len(p.Actions))
	for i, a := range p.Actions {
		fmt.Fprintf(w, "  %d. %s\n", i+1, actionLine(a))
	}
}

// actionLine is one action in words: what, where, what is lost and why.
func actionLine(a repair.Action) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s", a.Op, report.Escape(a.Path))
	switch a.Op {
	case repair.OpTruncateFile, repair.OpResizeFile:
		fmt.Fprintf(&b, " to %d bytes", a.NewSize)
	case repair.OpReplaceFile:
		fmt.Fprintf(&b, " (new size %d bytes)", a.NewSize)
	default:
		if a.Length > 0 {
			fmt.Fprintf(&b, " bytes %d-%d (%d bytes)", a.Offset, a.Offset+a.Length, a.Length)
		}
	}
	if a.Lost.Records > 0 {
		fmt.Fprintf(&b, "; loses %d record(s)", a.Lost.Records)
		if n := len(a.Lost.MsgIDs); n > 0 {
			ids := a.Lost.MsgIDs[:min(n, 3)]
			fmt.Fprintf(&b, " (%s", strings.Join(report.EscapeAll(ids), ", "))
			if n > 3 {
				fmt.Fprintf(&b, ", +%d more", n-3)
			}
			b.WriteString(")")
		}
	}
	if a.Reason != "" {
		fmt.Fprintf(&b, "; because of %s", report.Escape(a.Reason))
	}
	return b.String()
}

// restoreRange is one saved range (or whole file) an undo writes back.
type restoreRange struct {
	Offset int64 `json:"offset"`
	Length int64 `json:"length"`
	Whole  bool  `json:"whole,omitempty"`
}

// undoRecord describes one file of an undo: its action, the ranges the
// pre-images put back (from the manifest), the bytes, and the size before
// and after.
func undoRecord(m *repair.Manifest, f repair.UndoFile) actionRecord {
	st := "planned"
	if f.Done {
		st = "restored"
	}
	rec := actionRecord{Status: st, Op: "undo-" + f.Action, Path: f.Path, SHA256Before: f.SHA256Current, SHA256After: f.SHA256Before,
		Lost: repair.Loss{MsgIDs: []string{}}}
	var fr *repair.FileRecord
	for i := range m.Files {
		if m.Files[i].Path == f.Path {
			fr = &m.Files[i]
		}
	}
	var bytes int64
	first := int64(-1)
	for _, im := range m.Images {
		if im.Path != f.Path {
			continue
		}
		r := restoreRange{Offset: im.Offset, Length: im.Length, Whole: im.Whole}
		if im.Whole && fr != nil {
			r.Offset, r.Length = 0, fr.Size
		}
		rec.Restores = append(rec.Restores, r)
		bytes += r.Length
		if first < 0 || r.Offset < first {
			first = r.Offset
		}
	}
	if first >= 0 {
		rec.Offset = first
		last := int64(0)
		for _, r := range rec.Restores {
			last = max(last, r.Offset+r.Length)
		}
		rec.Length = last - first
	}
	rec.Bytes = &bytes
	var msg string
	switch f.Action {
	case repair.UndoNothing:
		msg = "already as before the apply"
	case repair.UndoTouch:
		msg = "the bytes are back; put back the modification time"
	case repair.UndoRemove:
		msg = "remove: the apply created this file"
	default:
		var parts []string
		for _, r := range rec.Restores {
			if r.Whole {
				parts = append(parts, fmt.Sprintf("the whole file (%d bytes)", r.Length))
			} else {
				parts = append(parts, fmt.Sprintf("%d-%d", r.Offset, r.Offset+r.Length))
			}
		}
		msg = fmt.Sprintf("put back %d byte(s) from the backup", bytes)
		if len(parts) > 0 {
			if len(parts) > 4 {
				parts = append(parts[:4], fmt.Sprintf("+%d more range(s)", len(parts)-4))
			}
			msg += ": " + strings.Join(parts, ", ")
		}
		if fr != nil {
			switch {
			case !fr.Existed:
			case !fr.ExistsAfter:
				msg += fmt.Sprintf("; recreates the file (%d bytes) the apply removed", fr.Size)
			case fr.SizeAfter != fr.Size:
				msg += fmt.Sprintf("; size %d -> %d", fr.SizeAfter, fr.Size)
			}
		}
	}
	if f.Stale {
		msg += "; changed since the apply"
	}
	rec.Message = msg
	return rec
}
