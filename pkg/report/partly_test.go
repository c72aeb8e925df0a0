package report

import (
	"bytes"
	"strings"
	"testing"

	"github.com/storectl/storectl/pkg/scan"
)

// TestCheckedSaysWhatWasNotRead: the text report's "checked:" line does
// not claim a component whose files the run could not read: one of
// several unread is "partly", all of them moves it to COULD NOT READ; a
// finding that only waits on an unread file (.unknown) changes nothing.
func TestCheckedSaysWhatWasNotRead(t *testing.T) {
	run := Run{Command: "verify", Store: "rabbitmq", DataDir: "/d", Components: []scan.Component{
		{Name: "rabbitmq.msg-store", Path: "msg_store_persistent", Files: 3, Bytes: 300, Checked: true, HoldsMessages: true},
		{Name: "rabbitmq.msg-store", Path: "msg_store_transient", Files: 1, Bytes: 100, Checked: true, HoldsMessages: true},
		{Name: "rabbitmq.queue-index", Path: "queues", Files: 4, Bytes: 40, Checked: true, HoldsMessages: true},
		{Name: "rabbitmq.metadata", Path: ".", Files: 2, Bytes: 9},
	}}
	for _, c := range []struct {
		name     string
		findings []scan.Finding
		want     []string // lines the report must hold
		not      []string // substrings it must not
	}{
		{"nothing unread", nil,
			[]string{"checked: msg_store_persistent, msg_store_transient, queues"}, []string{"partly", "COULD NOT READ"}},
		{"one of three, and all of one", []scan.Finding{
			{Code: "rabbitmq.rdq.unreadable", Severity: scan.Error, Path: "msg_store_persistent/2.rdq"},
			{Code: "storectl.file.not-regular", Severity: scan.Error, Path: "msg_store_transient/0.rdq"},
			{Code: "rabbitmq.queue.message-unknown", Severity: scan.Warning, Path: "queues/q1/0.idx"},
		}, []string{"COULD NOT READ: msg_store_transient: its 1 file(s)",
			"checked: msg_store_persistent (partly: 1 of 3 file(s) not read), queues"}, []string{"queues (partly"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var buf bytes.Buffer
			e, _ := New(&buf, Text, Style{Width: 200})
			if err := e.Run(run); err != nil {
				t.Fatal(err)
			}
			for _, f := range c.findings {
				if err := e.Finding(f); err != nil {
					t.Fatal(err)
				}
			}
			if err := e.Summary(Summary{ExitCode: 3, Incomplete: len(c.findings) > 0}); err != nil {
				t.Fatal(err)
			}
			out := buf.String()
			for _, w := range c.want {
				if !strings.Contains(out, w+"\n") {
					t.Errorf("no line %q in\n%s", w, out)
				}
			}
			for _, n := range c.not {
				if strings.Contains(out, n) {
					t.Errorf("%q in\n%s", n, out)
				}
			}
		})
	}
}

// TestFileMapsLeaveUnknownsOut: the file maps draw damage; a finding
// that only says what waits on an unread file (the timer units pointing
// past a commitlog file that could not be read, on timerlog file 0)
// neither lists the file as damaged nor paints its bytes X (it did).
func TestFileMapsLeaveUnknownsOut(t *testing.T) {
	file := scan.File{Path: "timerlog/00000000000000000000", Kind: "timerlog", Size: 4096, BytesScanned: 4096,
		Records: 78, FirstValid: 0, LastValid: 4004, ValidEnd: 4056, End: scan.EndBlank}
	unknown := scan.Finding{Code: "rocketmq.timerlog.target-unknown", Severity: scan.Warning, Path: file.Path, Offset: 0, Length: 52 * 77}
	garbage := scan.Finding{Code: "rocketmq.timerlog.bad-magic", Severity: scan.Error, Path: file.Path, Offset: 2048, Length: 52}
	draw := func(fs ...scan.Finding) string {
		var buf bytes.Buffer
		e, _ := New(&buf, Text, Style{Width: 84})
		if err := e.Run(Run{Command: "scan", Store: "rocketmq", DataDir: "/d"}); err != nil {
			t.Fatal(err)
		}
		if err := e.File(file); err != nil {
			t.Fatal(err)
		}
		for _, f := range fs {
			if err := e.Finding(f); err != nil {
				t.Fatal(err)
			}
		}
		if err := e.Summary(Summary{ExitCode: 3, Incomplete: true}); err != nil {
			t.Fatal(err)
		}
		return buf.String()
	}
	if out := draw(unknown); strings.Contains(out, "file maps") {
		t.Fatalf("a file with only an unknown finding drawn as damaged:\n%s", out)
	}
	out := draw(unknown, garbage)
	i := strings.Index(out, "  ["+strings.Repeat("=", 10))
	if !strings.Contains(out, "file maps (1 damaged file(s)") || i < 0 {
		t.Fatalf("the damaged file's map:\n%s", out)
	}
	m := out[i+3 : i+3+strings.Index(out[i+3:], "]")]
	if n := strings.Count(m, "X"); n == 0 || n > 2 || strings.Index(m, "X") < len(m)/2-1 {
		t.Fatalf("map %q: X only where the bad unit is (offset 2048 of 4096)", m)
	}
}
