package report

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/storectl/storectl/pkg/scan"
)

type testRecord struct {
	Path   string `json:"path"`
	Offset int64  `json:"offset"`
	Size   int    `json:"size"`
	MsgID  string `json:"msg_id"`
}

func emitAll(t *testing.T, e Emitter) {
	t.Helper()
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	must(e.Run(Run{Tool: "storectl", Command: "scan", DataDir: "/d", Store: "rocketmq"}))
	must(e.Record(testRecord{Path: "commitlog/0", Offset: 0, Size: 92, MsgID: "AB"}))
	must(e.Record(struct{}{}))
	must(e.File(scan.File{Path: "commitlog/0", Kind: "commitlog", Size: 100, Records: 1, End: scan.EndBlank}))
	must(e.Finding(scan.Finding{Code: "rocketmq.commitlog.body-crc", Severity: scan.Error, Path: "commitlog/0", Offset: 92, Repair: scan.RepairTruncate, Message: "bad <thing> & more"}))
	must(e.Summary(Summary{ExitCode: 1, Counts: map[string]int{"error": 1, "warning": 0, "info": 0}, Codes: map[string]int{"rocketmq.commitlog.body-crc": 1}}))
}

func TestJSONLEveryLineTypedSummaryLast(t *testing.T) {
	var buf bytes.Buffer
	e, _ := New(&buf, JSONL, Style{})
	emitAll(t, e)
	lines := strings.Split(strings.TrimRight(buf.String(), "\n"), "\n")
	if len(lines) != 6 {
		t.Fatalf("got %d lines:\n%s", len(lines), buf.String())
	}
	var types []string
	for _, l := range lines {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("line does not parse: %v: %s", err, l)
		}
		if m["schema"] != Schema {
			t.Fatalf("schema missing: %s", l)
		}
		types = append(types, m["type"].(string))
	}
	want := "run record record file finding summary"
	if got := strings.Join(types, " "); got != want {
		t.Fatalf("types %q, want %q", got, want)
	}
	if !strings.Contains(lines[4], "bad <thing> & more") {
		t.Fatalf("HTML escaping changed the message: %s", lines[4])
	}
	if !e.Done() {
		t.Fatal("Done false after Summary")
	}
}

func TestJSONDocument(t *testing.T) {
	var buf bytes.Buffer
	e, _ := New(&buf, JSON, Style{})
	emitAll(t, e)
	var doc map[string]any
	if err := json.Unmarshal(buf.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"run", "files", "findings", "actions", "summary", "records"} {
		if _, ok := doc[k]; !ok {
			t.Fatalf("json document lacks %q", k)
		}
	}
	if doc["summary"].(map[string]any)["exit_code"].(float64) != 1 {
		t.Fatal("exit_code lost")
	}
}

func TestTextColorOnlyWhenAsked(t *testing.T) {
	var plain, colored bytes.Buffer
	e, _ := New(&plain, Text, Style{Color: false})
	emitAll(t, e)
	if strings.Contains(plain.String(), "\x1b[") {
		t.Fatalf("escape codes without color:\n%s", plain.String())
	}
	for _, want := range []string{"rocketmq.commitlog.body-crc", "commitlog", "problems found", "exit 1"} {
		if !strings.Contains(plain.String(), want) {
			t.Fatalf("text lacks %q:\n%s", want, plain.String())
		}
	}
	e, _ = New(&colored, Text, Style{Color: true})
	emitAll(t, e)
	if !strings.Contains(colored.String(), "\x1b[") {
		t.Fatal("no escape codes with color on")
	}
}

func TestParseFormat(t *testing.T) {
	for _, f := range []string{"text", "json", "jsonl"} {
		if _, err := ParseFormat(f); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := ParseFormat("yaml"); err == nil {
		t.Fatal("yaml accepted")
	}
}

// unencodable is a queue whose JSON fails, as a spilled id list that
// cannot be read back does.
type unencodable struct{}

func (unencodable) MarshalJSON() ([]byte, error) {
	return nil, errors.New("reading msg ids back: gone")
}

// TestJSONSummaryAfterEncodeError: when the document cannot be encoded,
// nothing is written and the emitter is not done, so the error summary
// written next (finishAfterError) still makes one document, without the
// queue that failed: `-o json | jq .summary.exit_code` works.
func TestJSONSummaryAfterEncodeError(t *testing.T) {
	var buf bytes.Buffer
	em, err := New(&buf, JSON, Style{})
	if err != nil {
		t.Fatal(err)
	}
	if err := em.Run(Run{Tool: "storectl", Command: "verify"}); err != nil {
		t.Fatal(err)
	}
	if err := em.Queue(unencodable{}); err != nil {
		t.Fatal(err)
	}
	if err := em.Summary(Summary{ExitCode: 1}); err == nil || em.Done() || buf.Len() != 0 {
		t.Fatalf("encode error %v, done %v, %d bytes written", err, em.Done(), buf.Len())
	}
	if err := em.Summary(Summary{ExitCode: 3, Incomplete: true}); err != nil || !em.Done() {
		t.Fatalf("error summary: %v (done %v)", err, em.Done())
	}
	var doc struct {
		Queues  []any
		Summary struct {
			ExitCode int `json:"exit_code"`
		}
	}
	if err := json.Unmarshal(buf.Bytes(), &doc); err != nil || doc.Summary.ExitCode != 3 || len(doc.Queues) != 0 {
		t.Fatalf("document %s (%v)", buf.Bytes(), err)
	}
}
