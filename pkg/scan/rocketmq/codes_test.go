package rocketmq

import (
	"go/ast"
	"go/parser"
	"go/token"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// codeConstants returns every string constant codes.go declares, by name.
func codeConstants(t *testing.T) map[string]string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "codes.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	ast.Inspect(f, func(n ast.Node) bool {
		vs, ok := n.(*ast.ValueSpec)
		if !ok {
			return true
		}
		for i, name := range vs.Names {
			if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
				v, _ := strconv.Unquote(lit.Value)
				out[name.Name] = v
			}
		}
		return true
	})
	return out
}

// TestCodes: every code is spelled once, has the contract's shape
// store.component.what, and every consume queue and index code counts as
// a finding about the files rebuild-index regenerates.
func TestCodes(t *testing.T) {
	shape := regexp.MustCompile(`^rocketmq\.[a-z]+\.[a-z0-9-]+$`)
	seen := map[string]string{}
	consts := codeConstants(t)
	if len(consts) < 40 {
		t.Fatalf("only %d codes parsed from codes.go", len(consts))
	}
	for name, code := range consts {
		if !shape.MatchString(code) {
			t.Errorf("%s = %q: not store.component.what", name, code)
		}
		if other, dup := seen[code]; dup {
			t.Errorf("%s and %s both spell %q", name, other, code)
		}
		seen[code] = name
		comp := strings.Split(code, ".")[1]
		if want := comp == "consumequeue" || comp == "index"; IsDerivedFileCode(code) != want {
			t.Errorf("IsDerivedFileCode(%s) = %v, want %v", name, !want, want)
		}
	}
}
