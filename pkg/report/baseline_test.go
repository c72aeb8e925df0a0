package report

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/storectl/storectl/pkg/scan"
)

// TestBaselineKeys: the key ignores message and severity (a new broker
// version or severity policy keeps it), and changes with code, path,
// offset and message id; a saved baseline loads back and resolves what
// the next run does not report.
func TestBaselineKeys(t *testing.T) {
	f := scan.Finding{Code: "rocketmq.commitlog.stale-record", Severity: scan.Error, Path: "commitlog/0", Offset: 10, MsgID: "AB", Message: "x"}
	g := f
	g.Message, g.Severity = "other words", scan.Warning
	if FindingKey(&f) != FindingKey(&g) {
		t.Error("message or severity changed the key")
	}
	for _, mod := range []func(*scan.Finding){
		func(x *scan.Finding) { x.Code += "x" }, func(x *scan.Finding) { x.Path += "x" },
		func(x *scan.Finding) { x.Offset++ }, func(x *scan.Finding) { x.MsgID = "" },
	} {
		h := f
		mod(&h)
		if FindingKey(&h) == FindingKey(&f) {
			t.Errorf("%+v has the key of %+v", h, f)
		}
	}
	path := filepath.Join(t.TempDir(), "b.json")
	b, err := LoadBaseline(path)
	if err != nil {
		t.Fatal(err)
	}
	a, c := f, f
	c.Offset = 99
	b.Mark(&a)
	b.Mark(&c)
	if a.Baseline != BaselineNew || b.Summary(10).Previous {
		t.Fatalf("first run: %q", a.Baseline)
	}
	if err := b.Save("/data", time.Now()); err != nil {
		t.Fatal(err)
	}
	b2, err := LoadBaseline(path)
	if err != nil {
		t.Fatal(err)
	}
	a2 := f
	b2.Mark(&a2)
	s := b2.Summary(10)
	if a2.Baseline != BaselinePersistent || s.New != 0 || s.Persistent != 1 || s.Resolved != 1 || s.ResolvedFindings[0].Offset != 99 {
		t.Fatalf("second run: %q %+v", a2.Baseline, s)
	}
}
