package rabbitmq

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// codeShape is the contract's store.component.what.
var codeShape = regexp.MustCompile(`^rabbitmq\.[a-z-]+\.[a-z0-9-]+$`)

// stringLits returns the string literals of a Go file, with their
// positions, and the constants it declares (name -> value).
func stringLits(t *testing.T, path string) (lits map[string]token.Position, consts map[string]string) {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	lits, consts = map[string]token.Position{}, map[string]string{}
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.BasicLit:
			if n.Kind == token.STRING {
				v, _ := strconv.Unquote(n.Value)
				lits[v] = fset.Position(n.Pos())
			}
		case *ast.ValueSpec:
			for i, name := range n.Names {
				if i < len(n.Values) {
					if lit, ok := n.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
						v, _ := strconv.Unquote(lit.Value)
						consts[name.Name] = v
					}
				}
			}
		}
		return true
	})
	return lits, consts
}

// TestCodes: every finding code of the RabbitMQ classic store is declared
// once, in codes.go, in the contract's shape; no other file of the
// packages that make or match them (format, scan, repair, salvage) spells
// one.
func TestCodes(t *testing.T) {
	_, consts := stringLits(t, "codes.go")
	if len(consts) < 25 {
		t.Fatalf("only %d codes parsed from codes.go", len(consts))
	}
	seen := map[string]string{}
	for name, code := range consts {
		if !strings.HasPrefix(name, "Code") || !codeShape.MatchString(code) {
			t.Errorf("%s = %q: not a Code constant of shape store.component.what", name, code)
		}
		if other, dup := seen[code]; dup {
			t.Errorf("%s and %s both spell %q", name, other, code)
		}
		seen[code] = name
	}
	dirs := []string{".", "../../repair/rabbitmq", "../../salvage"}
	for _, d := range dirs {
		files, err := filepath.Glob(filepath.Join(d, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range files {
			if strings.HasSuffix(p, "_test.go") || filepath.Base(p) == "codes.go" {
				continue
			}
			if _, err := os.Stat(p); err != nil {
				t.Fatal(err)
			}
			lits, _ := stringLits(t, p)
			for v, pos := range lits {
				if codeShape.MatchString(v) {
					t.Errorf("%s: finding code %q spelled outside codes.go", pos, v)
				}
			}
		}
	}
}
