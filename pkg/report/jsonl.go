package report

import (
	"bufio"
	"bytes"
	"fmt"
	"io"

	"github.com/storectl/storectl/pkg/scan"
)

// jsonlEmitter writes one object per line, each beginning with the
// schema and type fields, as soon as it gets it.
type jsonlEmitter struct {
	w    *bufio.Writer
	done bool
	fe   *findingEncoder // encodes findings, and every other line (marshal)
	lb   []byte          // Finding's reusable line buffer
}

func newJSONL(w io.Writer) *jsonlEmitter {
	return &jsonlEmitter{w: bufio.NewWriterSize(w, 256<<10), fe: newFindingEncoder()}
}

// line marshals v (which must marshal to a JSON object) and writes it
// with {"schema":…,"type":…} spliced in front of its fields.
func (e *jsonlEmitter) line(typ string, v any) error {
	if err := e.begin(typ, v); err != nil {
		return err
	}
	_, err := e.w.WriteString("}\n")
	return err
}

// begin writes line's first part: {"schema":…,"type":… and v's fields,
// without the closing "}\n", for a caller that appends more fields.
func (e *jsonlEmitter) begin(typ string, v any) error {
	b, err := e.fe.marshal(v)
	if err != nil {
		return err
	}
	fields, ok := bytes.CutSuffix(b, []byte("}\n")) // Encode ends each value in a newline
	if !ok || len(fields) == 0 || fields[0] != '{' {
		return fmt.Errorf("report: %s does not marshal to an object", typ)
	}
	fmt.Fprintf(e.w, `{"schema":%q,"type":%q`, Schema, typ)
	if fields = fields[1:]; len(fields) > 0 {
		e.w.WriteByte(',')
		e.w.Write(fields)
	}
	return nil
}

func (e *jsonlEmitter) Run(r Run) error        { return e.line("run", r) }
func (e *jsonlEmitter) Record(rec any) error   { return e.line("record", rec) }
func (e *jsonlEmitter) File(f scan.File) error { return e.line("file", f) }

// Finding writes f through the reflection-free encoder (finding_json.go).
func (e *jsonlEmitter) Finding(f scan.Finding) error {
	b := append(e.lb[:0], `{"schema":"`+Schema+`","type":"finding",`...)
	b, err := e.fe.appendFindingFields(b, &f)
	if err != nil {
		return err
	}
	b = append(b, '}', '\n')
	e.lb = b
	_, err = e.w.Write(b)
	return err
}

// Queue writes q; a scan.Queue's id lists are streamed (queue.go).
func (e *jsonlEmitter) Queue(q any) error {
	if sq, ok := asQueue(q); ok {
		return e.writeQueue(sq)
	}
	return e.line("queue", q)
}

func (e *jsonlEmitter) Action(a any) error { return e.line("action", a) }
func (e *jsonlEmitter) Done() bool         { return e.done }

func (e *jsonlEmitter) Summary(s Summary) error {
	if err := e.line("summary", s); err != nil {
		return err
	}
	e.done = true
	return e.w.Flush()
}
