package archtest

import (
	"fmt"
	"go/ast"
	"slices"
	"sort"
	"strings"
	"testing"
)

// impureImports are what a decoder under pkg/format must not import: it
// turns bytes into structs and back, and the layer above owns files,
// directories, goroutines, locks and pools (docs/architecture.md).
var impureImports = map[string]string{
	"os":                            "opens files, lists directories",
	"io/fs":                         "walks file systems",
	"path/filepath":                 "builds and walks OS paths",
	"sync":                          "locks, pools, wait groups",
	"sync/atomic":                   "shared state between goroutines",
	"runtime":                       "scheduling and memory control",
	"os/exec":                       "runs processes",
	"syscall":                       "system calls",
	"net":                           "network I/O",
	"golang.org/x/sys/unix":         "system calls",
	module + "/internal/fileview":   "opens and maps files",
	module + "/internal/offheap":    "maps memory outside the heap",
	module + "/internal/sparse":     "file system holes",
	module + "/internal/testutil":   "test helpers",
	module + "/internal/streamtest": "test helpers",
}

// impureAllowed lists what pkg/format may do that it must not, file by
// file; the test fails when a listed violation is gone, so whoever fixes
// one also shrinks this list. It is empty: the RabbitMQ queue-directory
// readers, its last entries, moved to pkg/scan/rabbitmq (issue #17).
var impureAllowed = map[string][]string{}

// TestFormatIsPure: no file under pkg/format (tests aside) imports a
// package that reaches files, directories, goroutines or locks, or
// starts a goroutine, except as impureAllowed says.
func TestFormatIsPure(t *testing.T) {
	got := map[string][]string{}
	n := 0
	for _, f := range repoFiles(t) {
		if f.test || !under(f.dir, "pkg/format") {
			continue
		}
		n++
		var v []string
		for _, im := range f.imports {
			if _, bad := impureImports[im]; bad {
				v = append(v, "import "+strings.TrimPrefix(im, module+"/"))
			}
		}
		ast.Inspect(f.ast, func(x ast.Node) bool {
			if _, ok := x.(*ast.GoStmt); ok {
				v = append(v, "go statement")
			}
			return true
		})
		if len(v) > 0 {
			sort.Strings(v)
			got[f.rel] = slices.Compact(v)
		}
	}
	if n < 20 {
		t.Fatalf("only %d files under pkg/format", n)
	}
	for file, vs := range got {
		allowed := impureAllowed[file]
		for _, x := range vs {
			if !slices.Contains(allowed, x) {
				t.Errorf("%s: %s (%s): a decoder under pkg/format works on bytes; move this to pkg/scan (docs/architecture.md)", file, x, why(x))
			}
		}
	}
	for file, vs := range impureAllowed {
		for _, x := range vs {
			if !slices.Contains(got[file], x) {
				t.Errorf("%s no longer has %q: remove it from impureAllowed", file, x)
			}
		}
	}
}

func why(v string) string {
	if v == "go statement" {
		return "starts a goroutine"
	}
	im := strings.TrimPrefix(v, "import ")
	if r, ok := impureImports[im]; ok {
		return r
	}
	return impureImports[module+"/"+im]
}

// TestFormatPurityCheck: the check sees what it looks for (a test that
// cannot fail would prove nothing).
func TestFormatPurityCheck(t *testing.T) {
	seen := map[string]bool{}
	for _, f := range repoFiles(t) {
		if f.test || !under(f.dir, "pkg/scan") {
			continue
		}
		for _, im := range f.imports {
			if _, bad := impureImports[im]; bad {
				seen[im] = true
			}
		}
		ast.Inspect(f.ast, func(x ast.Node) bool {
			if _, ok := x.(*ast.GoStmt); ok {
				seen["go"] = true
			}
			return true
		})
	}
	for _, want := range []string{"os", "sync", "go", module + "/internal/fileview"} {
		if !seen[want] {
			t.Errorf("the purity check found no %s under pkg/scan, where the scanners use it: %v", want, fmt.Sprint(seen))
		}
	}
}
