// Command testreport reads `go test -json` on stdin and prints what a
// person needs from it: one line per package, every skipped test with the
// reason it gave, and the whole output of every failed test. It exits 1
// when any test, package or build failed, so `make test` cannot show a
// skip as a plain "ok" or a failure as a pass.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"
)

// event is one line of `go test -json` (cmd/test2json).
type event struct {
	Action     string
	Package    string
	ImportPath string // build-output and build-fail events name the package here
	Test       string
	Output     string
	Elapsed    float64
}

type key struct{ pkg, test string }

func main() {
	os.Exit(report(os.Stdin, os.Stdout))
}

func report(in io.Reader, out io.Writer) int {
	output := map[key]*strings.Builder{}
	var skips, fails []key
	failed := false
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var e event
		if err := json.Unmarshal(line, &e); err != nil || e.Action == "" {
			// Not test2json (a build error printed by go itself): pass it on.
			fmt.Fprintf(out, "%s\n", line)
			continue
		}
		if e.Package == "" {
			e.Package = e.ImportPath
		}
		k := key{e.Package, e.Test}
		switch e.Action {
		case "output", "build-output":
			b := output[k]
			if b == nil {
				b = &strings.Builder{}
				output[k] = b
			}
			b.WriteString(e.Output)
		case "skip":
			if e.Test != "" {
				skips = append(skips, k)
			} else {
				fmt.Fprintf(out, "?   \t%s\t[no test files]\n", e.Package)
			}
		case "fail", "build-fail":
			failed = true
			if e.Test != "" {
				fails = append(fails, k)
			} else {
				fmt.Fprintf(out, "FAIL\t%s\t%s\n", e.Package, dur(e.Elapsed))
				if b := output[k]; b != nil && e.Action == "build-fail" {
					fmt.Fprint(out, b.String())
				}
			}
		case "pass":
			if e.Test == "" {
				fmt.Fprintf(out, "ok  \t%s\t%s\n", e.Package, dur(e.Elapsed))
			}
		}
	}
	if err := sc.Err(); err != nil {
		fmt.Fprintf(out, "testreport: reading go test -json: %v\n", err)
		return 1
	}
	if len(skips) > 0 {
		sort.Slice(skips, func(i, j int) bool { return skips[i].pkg+skips[i].test < skips[j].pkg+skips[j].test })
		fmt.Fprintf(out, "\n%d skipped test(s):\n", len(skips))
		for _, k := range skips {
			fmt.Fprintf(out, "SKIP %s %s: %s\n", k.pkg, k.test, reason(output[k]))
		}
	}
	for _, k := range fails {
		fmt.Fprintf(out, "\n--- FAIL %s %s\n", k.pkg, k.test)
		if b := output[k]; b != nil {
			fmt.Fprint(out, b.String())
		}
	}
	if failed {
		fmt.Fprintln(out, "\nFAIL")
		return 1
	}
	return 0
}

// reason is what a skipped test printed, less test2json's own lines.
func reason(b *strings.Builder) string {
	if b == nil {
		return "(no reason given)"
	}
	var keep []string
	for _, l := range strings.Split(b.String(), "\n") {
		t := strings.TrimSpace(l)
		if t == "" || strings.HasPrefix(t, "=== ") || strings.HasPrefix(t, "--- SKIP") {
			continue
		}
		keep = append(keep, t)
	}
	if len(keep) == 0 {
		return "(no reason given)"
	}
	return strings.Join(keep, " ")
}

func dur(s float64) string {
	return (time.Duration(s * float64(time.Second))).Round(time.Millisecond).String()
}
