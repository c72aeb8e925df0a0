package scan

import "testing"

// TestResultTake: the first list taken is kept, not copied (findings can
// be most of a scan's heap); later lists are appended after it in order.
func TestResultTake(t *testing.T) {
	var r Result
	first := []Finding{{Code: "a", Offset: 1}, {Code: "b", Offset: 2}}
	r.Take(first)
	if &r.Findings[0] != &first[0] {
		t.Error("the first list was copied")
	}
	r.Take([]Finding{{Code: "c", Offset: 3}})
	r.Take(nil)
	var got []string
	for _, f := range r.Findings {
		got = append(got, f.Code)
	}
	if len(got) != 3 || got[0] != "a" || got[1] != "b" || got[2] != "c" {
		t.Errorf("findings %v, want [a b c]", got)
	}
}
