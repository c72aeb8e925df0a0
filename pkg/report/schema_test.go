package report_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/storectl/storectl/pkg/report"
	"github.com/storectl/storectl/pkg/report/schema"
)

func TestSchemasAcceptEmitterOutput(t *testing.T) {
	v, err := schema.NewValidator()
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	e, _ := report.New(&buf, report.JSONL, report.Style{})
	report.EmitAll(t, e)
	for _, l := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		if strings.Contains(l, `"type":"record"`) && !strings.Contains(l, "msg_id") {
			continue // the empty test record is deliberately not a valid record
		}
		if err := v.ValidateObject([]byte(l)); err != nil {
			t.Errorf("%v\n%s", err, l)
		}
	}
}
