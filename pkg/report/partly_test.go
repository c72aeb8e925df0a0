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
