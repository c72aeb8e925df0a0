package scan

import (
	"encoding/json"
	"testing"
)

func TestSeverityJSON(t *testing.T) {
	for _, s := range []Severity{Info, Warning, Error} {
		b, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		var back Severity
		if err := json.Unmarshal(b, &back); err != nil || back != s {
			t.Fatalf("%s round trip: %v %v", b, back, err)
		}
	}
	var s Severity
	if err := json.Unmarshal([]byte(`"fatal"`), &s); err == nil {
		t.Fatal("unknown severity accepted")
	}
}

func TestResultCountsAndOrder(t *testing.T) {
	r := &Result{}
	r.Add(Finding{Code: "b", Severity: Warning, Path: "x", Offset: 9},
		Finding{Code: "a", Severity: Error, Path: "x", Offset: 1},
		Finding{Code: "a", Severity: Error, Path: "a", Offset: 5})
	r.SortFindings()
	if r.Findings[0].Path != "a" || r.Findings[1].Offset != 1 {
		t.Fatalf("order: %+v", r.Findings)
	}
	sev, codes := r.Counts()
	if sev["error"] != 2 || sev["warning"] != 1 || codes["a"] != 2 {
		t.Fatalf("counts %v %v", sev, codes)
	}
	if w, ok := r.Worst(); !ok || w != Error {
		t.Fatalf("worst %v", w)
	}
}
