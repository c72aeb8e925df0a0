package report

import (
	"encoding/json"
	"io"

	"github.com/storectl/storectl/pkg/scan"
)

// jsonEmitter collects everything and writes one document at Summary:
// {"schema":…,"run":…,"records":[…],"files":[…],"findings":[…],
// "queues":[…],"actions":[…],"summary":…}.
type jsonEmitter struct {
	w    io.Writer
	done bool
	doc  jsonDoc
}

type jsonDoc struct {
	Schema   string         `json:"schema"`
	Run      *Run           `json:"run"`
	Records  []any          `json:"records,omitempty"`
	Files    []scan.File    `json:"files"`
	Findings []scan.Finding `json:"findings"`
	Queues   []any          `json:"queues,omitempty"`
	Actions  []any          `json:"actions"`
	Summary  *Summary       `json:"summary"`
}

func newJSON(w io.Writer) *jsonEmitter {
	return &jsonEmitter{w: w, doc: jsonDoc{Schema: Schema, Files: []scan.File{}, Findings: []scan.Finding{}, Actions: []any{}}}
}

func (e *jsonEmitter) Run(r Run) error        { e.doc.Run = &r; return nil }
func (e *jsonEmitter) Record(rec any) error   { e.doc.Records = append(e.doc.Records, rec); return nil }
func (e *jsonEmitter) File(f scan.File) error { e.doc.Files = append(e.doc.Files, f); return nil }
func (e *jsonEmitter) Finding(f scan.Finding) error {
	e.doc.Findings = append(e.doc.Findings, f)
	return nil
}
func (e *jsonEmitter) Queue(q any) error  { e.doc.Queues = append(e.doc.Queues, q); return nil }
func (e *jsonEmitter) Action(a any) error { e.doc.Actions = append(e.doc.Actions, a); return nil }
func (e *jsonEmitter) Done() bool         { return e.done }

func (e *jsonEmitter) Summary(s Summary) error {
	e.doc.Summary = &s
	enc := json.NewEncoder(e.w)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(e.doc); err != nil {
		// Nothing was written (the encoder writes only a whole value). A
		// part that could not be encoded (a queue's spilled id list that
		// cannot be read back) is dropped, so the error summary the caller
		// writes next still makes a document.
		e.doc.Queues, e.doc.Records = nil, nil
		return err
	}
	e.done = true
	return nil
}
