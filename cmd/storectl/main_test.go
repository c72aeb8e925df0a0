package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/mattn/go-isatty"
	"github.com/rogpeppe/go-internal/testscript"

	"github.com/storectl/storectl/internal/testutil"
	"github.com/storectl/storectl/pkg/report"
)

var update = flag.Bool("update", false, "rewrite testscript files with actual output")

func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){
		"storectl": func() {
			// Test-only fault hook: fail the Nth write step of --apply.
			if n, err := strconv.Atoi(os.Getenv("STORECTL_TEST_FAIL_WRITE")); err == nil {
				testFaults.FailAtWrite = n
			}
			os.Exit(run(context.Background(), os.Args[1:], Streams{
				In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr,
				IsTTY: isatty.IsTerminal(os.Stdout.Fd()), Getenv: os.Getenv,
			}))
		},
	})
}

func TestScripts(t *testing.T) {
	testscript.Run(t, testscript.Params{
		Dir:                 filepath.Join("testdata", "script"),
		UpdateScripts:       *update,
		RequireExplicitExec: true,
		Setup: func(e *testscript.Env) error {
			e.Setenv("TESTDATA", testutil.Testdata())
			e.Setenv("NO_COLOR", "")
			return nil
		},
		Cmds: map[string]func(*testscript.TestScript, bool, []string){
			"unpack":   cmdUnpack,
			"treehash": cmdTreeHash,
			"jsonl":    cmdJSONL,
			"jsonpath": cmdJSONPath,
			"schema":   cmdSchema,
		},
	})
}

// unpack FIXTURE DIR: untar a fixture from the repository's testdata
// (path relative to testdata/) into DIR.
func cmdUnpack(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: unpack FIXTURE DIR")
	}
	if err := testutil.UntarTo(testutil.Testdata(args[0]), ts.MkAbs(args[1])); err != nil {
		ts.Fatalf("unpack: %v", err)
	}
}

// treehash DIR FILE: write "sha256 path" lines of every file under DIR to
// FILE, so a later `cmp` proves a command changed nothing.
func cmdTreeHash(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: treehash DIR FILE")
	}
	h, err := testutil.HashTree(ts.MkAbs(args[0]))
	if err != nil {
		ts.Fatalf("treehash: %v", err)
	}
	var keys []string
	for k := range h {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b bytes.Buffer
	for _, k := range keys {
		fmt.Fprintf(&b, "%s %s\n", h[k], k)
	}
	if err := os.WriteFile(ts.MkAbs(args[1]), b.Bytes(), 0o644); err != nil {
		ts.Fatalf("%v", err)
	}
}

// jsonl FILE EXIT: every line of FILE is a JSON object with the schema
// and a type, the first is `run` and the last is the `summary` whose
// exit_code is EXIT.
func cmdJSONL(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: jsonl FILE EXIT")
	}
	want, _ := strconv.Atoi(args[1])
	data := ts.ReadFile(args[0])
	sc := bufio.NewScanner(strings.NewReader(data))
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	var last map[string]any
	n := 0
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			ts.Fatalf("line %d is not JSON: %v: %s", n+1, err, sc.Text())
		}
		if m["schema"] != "storectl/v1" || m["type"] == nil {
			ts.Fatalf("line %d lacks schema/type: %s", n+1, sc.Text())
		}
		if n == 0 && m["type"] != "run" {
			ts.Fatalf("first line is %v, not run", m["type"])
		}
		last = m
		n++
	}
	if n == 0 || last["type"] != "summary" {
		ts.Fatalf("last line is not a summary (%d lines)", n)
	}
	if got := int(last["exit_code"].(float64)); got != want {
		ts.Fatalf("summary exit_code %d, want %d", got, want)
	}
}

// jsonpath FILE PATH VALUE: the JSON document in FILE has VALUE (compared
// as its JSON text) at the slash-separated PATH (numbers index arrays).
func cmdJSONPath(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 3 {
		ts.Fatalf("usage: jsonpath FILE PATH VALUE")
	}
	var v any
	if err := json.Unmarshal([]byte(ts.ReadFile(args[0])), &v); err != nil {
		ts.Fatalf("%s is not a JSON document: %v", args[0], err)
	}
	for _, k := range strings.Split(args[1], "/") {
		switch x := v.(type) {
		case map[string]any:
			v = x[k]
		case []any:
			i, err := strconv.Atoi(k)
			if err != nil || i < 0 || i >= len(x) {
				ts.Fatalf("bad index %q", k)
			}
			v = x[i]
		default:
			ts.Fatalf("path %s: %q not found", args[1], k)
		}
	}
	got, _ := json.Marshal(v)
	if (string(got) == args[2]) == neg {
		ts.Fatalf("%s at %s is %s (want %s%s)", args[0], args[1], got, map[bool]string{true: "not "}[neg], args[2])
	}
}

// schema FILE: every JSONL line of FILE (or the single JSON document)
// validates against the storectl/v1 JSON Schemas in pkg/report/schema.
func cmdSchema(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: schema FILE")
	}
	v, err := report.NewValidator()
	if err != nil {
		ts.Fatalf("%v", err)
	}
	data := strings.TrimSpace(ts.ReadFile(args[0]))
	if strings.HasPrefix(data, "{\n") {
		if err := v.ValidateDocument([]byte(data)); err != nil {
			ts.Fatalf("json document: %v", err)
		}
		return
	}
	for i, l := range strings.Split(data, "\n") {
		if err := v.ValidateObject([]byte(l)); err != nil {
			ts.Fatalf("line %d: %v\n%s", i+1, err, l)
		}
	}
}
