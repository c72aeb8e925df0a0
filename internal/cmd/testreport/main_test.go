package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestReportSkipsAndFailures(t *testing.T) {
	in := `{"Action":"run","Package":"p","Test":"TestA"}
{"Action":"output","Package":"p","Test":"TestA","Output":"=== RUN   TestA\n"}
{"Action":"output","Package":"p","Test":"TestA","Output":"    a_test.go:9: escript not found: skipped\n"}
{"Action":"output","Package":"p","Test":"TestA","Output":"--- SKIP: TestA (0.00s)\n"}
{"Action":"skip","Package":"p","Test":"TestA"}
{"Action":"pass","Package":"p","Elapsed":0.5}
`
	var out bytes.Buffer
	if code := report(strings.NewReader(in), &out); code != 0 {
		t.Fatalf("exit %d for a run with only a skip:\n%s", code, out.String())
	}
	if !strings.Contains(out.String(), "SKIP p TestA: a_test.go:9: escript not found: skipped") {
		t.Fatalf("skip reason not printed:\n%s", out.String())
	}
	in += `{"Action":"output","Package":"q","Test":"TestB","Output":"    b_test.go:3: boom\n"}
{"Action":"fail","Package":"q","Test":"TestB"}
{"Action":"fail","Package":"q","Elapsed":1}
`
	out.Reset()
	if code := report(strings.NewReader(in), &out); code != 1 {
		t.Fatalf("exit %d for a failed test, want 1", code)
	}
	if !strings.Contains(out.String(), "boom") || !strings.Contains(out.String(), "FAIL\tq") {
		t.Fatalf("failure not shown:\n%s", out.String())
	}
	out.Reset()
	if code := report(strings.NewReader(`{"Action":"build-fail","Package":"r"}`+"\n"), &out); code != 1 {
		t.Fatalf("exit %d for a build failure, want 1", code)
	}
}
