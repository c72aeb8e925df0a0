package archtest

import (
	"fmt"
	"sort"
	"strings"
	"testing"
)

// A floor of the house (docs/architecture.md). Code imports from its own
// floor and the floors below it, never from above; the three packages of
// the commands' floor (repair, salvage, report) do not import each other.
type floor struct {
	name  string
	level int
	dirs  []string // directories (and everything below them) on this floor
}

var floors = []floor{
	{"format", 0, []string{"pkg/format", "internal/crc32x"}},
	{"scan", 1, []string{"pkg/scan", "pkg/live", "internal/fileview", "internal/offheap", "internal/sparse"}},
	{"repair", 2, []string{"pkg/repair"}},
	{"salvage", 2, []string{"pkg/salvage"}},
	{"report", 2, []string{"pkg/report"}},
	{"cmd", 3, []string{"cmd"}},
}

// testOnly are packages that only tests, benchmarks and the tools under
// internal/cmd may import: generators that write store bytes and test
// helpers.
var testOnly = []string{"internal/gen", "internal/testutil", "internal/streamtest"}

// thirdParty says which floors may import a third-party module: the CLI
// libraries stay in cmd, the terminal rendering in report (house style
// 2.2), the AMQP client in salvage (re-publishing), JSON Schema in the
// report's schema tests.
var thirdParty = map[string][]string{
	"github.com/spf13/cobra":                {"cmd"},
	"github.com/spf13/viper":                {"cmd"},
	"github.com/spf13/pflag":                {"cmd"},
	"github.com/olekukonko/tablewriter":     {"report", "cmd"},
	"github.com/fatih/color":                {"report", "cmd"},
	"github.com/mattn/go-isatty":            {"cmd"},
	"github.com/rabbitmq/amqp091-go":        {"salvage", "cmd"},
	"github.com/santhosh-tekuri/jsonschema": {"report"},
	"github.com/rogpeppe/go-internal":       {"cmd"},
	"golang.org/x/sys/unix":                 {"scan", "repair", "salvage", "report", "cmd"},
	"golang.org/x/sys/cpu":                  {"format", "scan", "repair", "salvage", "report", "cmd"},
	"golang.org/x/term":                     {"cmd"},
	"github.com/schollz/progressbar":        {"cmd"},
	"github.com/prometheus/common":          {"report", "cmd"},
}

func floorOf(dir string) (floor, bool) {
	for _, f := range floors {
		for _, d := range f.dirs {
			if under(dir, d) {
				return f, true
			}
		}
	}
	return floor{}, false
}

func isTestOnly(dir string) bool {
	for _, d := range testOnly {
		if under(dir, d) {
			return true
		}
	}
	return false
}

// importErrors applies the floor rules to one file's imports.
func importErrors(f goFile) []string {
	var errs []string
	from, placed := floorOf(f.dir)
	for _, im := range f.imports {
		if dir, ok := strings.CutPrefix(im, module+"/"); ok {
			if isTestOnly(dir) && !f.test && !under(f.dir, "internal/cmd") && !isTestOnly(f.dir) {
				errs = append(errs, fmt.Sprintf("imports %s, which only tests and internal/cmd may use", dir))
				continue
			}
			to, ok := floorOf(dir)
			if !ok || !placed || f.test { // a test may use what it needs to set up its case
				continue
			}
			switch {
			case to.level > from.level:
				errs = append(errs, fmt.Sprintf("%s (floor %s) imports %s (floor %s, above it)", f.dir, from.name, dir, to.name))
			case to.level == from.level && to.level == 2 && to.name != from.name:
				errs = append(errs, fmt.Sprintf("%s (floor %s) imports %s (floor %s): repair, salvage and report do not import each other", f.dir, from.name, dir, to.name))
			}
			continue
		}
		if !strings.Contains(strings.SplitN(im, "/", 2)[0], ".") || f.test {
			continue // standard library, or a test's own tools
		}
		allowed, known := allowedThirdParty(im)
		if !known {
			errs = append(errs, fmt.Sprintf("imports %s, a module thirdParty does not place (add it, with the floors that may use it)", im))
			continue
		}
		if placed && !contains(allowed, from.name) {
			errs = append(errs, fmt.Sprintf("%s (floor %s) imports %s, allowed on %v only", f.dir, from.name, im, allowed))
		}
	}
	return errs
}

func allowedThirdParty(im string) ([]string, bool) {
	for mod, fl := range thirdParty {
		if im == mod || strings.HasPrefix(im, mod+"/") || strings.HasPrefix(im, mod) && strings.HasPrefix(im[len(mod):], "/v") {
			return fl, true
		}
	}
	return nil, false
}

func contains(s []string, x string) bool {
	for _, v := range s {
		if v == x {
			return true
		}
	}
	return false
}

// TestImportFloors: every package imports from its own floor or below,
// test-only packages stay out of production code, and third-party
// modules stay on their floors.
func TestImportFloors(t *testing.T) {
	var errs []string
	dirs := map[string]bool{}
	for _, f := range repoFiles(t) {
		for _, e := range importErrors(f) {
			errs = append(errs, f.rel+": "+e)
		}
		if _, ok := floorOf(f.dir); !ok && !f.test && !isTestOnly(f.dir) && !under(f.dir, "internal") {
			dirs[f.dir] = true
		}
	}
	for d := range dirs {
		errs = append(errs, d+": a package on no floor: add it to floors (and docs/architecture.md)")
	}
	sort.Strings(errs)
	for _, e := range errs {
		t.Error(e)
	}
}

// TestImportFloorsCheck: the rules catch what they are for.
func TestImportFloorsCheck(t *testing.T) {
	cases := []struct {
		f    goFile
		want string
	}{
		{goFile{dir: "pkg/format/rocketmq", imports: []string{module + "/pkg/scan"}}, "above it"},
		{goFile{dir: "pkg/scan/rocketmq", imports: []string{module + "/pkg/repair"}}, "above it"},
		{goFile{dir: "pkg/repair/rocketmq", imports: []string{module + "/pkg/salvage"}}, "do not import each other"},
		{goFile{dir: "pkg/scan", imports: []string{module + "/internal/gen/rocketmq"}}, "only tests"},
		{goFile{dir: "pkg/scan", imports: []string{"github.com/spf13/cobra"}}, "allowed on"},
		{goFile{dir: "pkg/format", imports: []string{"golang.org/x/sys/unix"}}, "allowed on"},
		{goFile{dir: "pkg/scan", imports: []string{"example.com/new/module"}}, "does not place"},
	}
	for _, c := range cases {
		errs := importErrors(c.f)
		if len(errs) != 1 || !strings.Contains(errs[0], c.want) {
			t.Errorf("%s importing %v: %q, want one error with %q", c.f.dir, c.f.imports, errs, c.want)
		}
	}
	ok := []goFile{
		{dir: "cmd/storectl", imports: []string{module + "/pkg/repair", module + "/pkg/report", "github.com/spf13/cobra"}},
		{dir: "pkg/repair/rocketmq", imports: []string{module + "/pkg/scan/rocketmq", module + "/pkg/format/rocketmq", module + "/pkg/repair"}},
		{dir: "pkg/scan", imports: []string{module + "/internal/gen/rocketmq"}, test: true},
	}
	for _, f := range ok {
		if errs := importErrors(f); len(errs) > 0 {
			t.Errorf("%s: %v", f.dir, errs)
		}
	}
}
