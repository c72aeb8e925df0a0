package archtest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/storectl/storectl/internal/testutil"
)

// module is the module path of go.mod.
const module = "github.com/storectl/storectl"

// goFile is one parsed Go file of the repository.
type goFile struct {
	rel     string // slash-separated path from the repository root
	dir     string // its directory, slash-separated ("pkg/format/rocketmq")
	test    bool   // a _test.go file
	ast     *ast.File
	fset    *token.FileSet
	imports []string
}

// repoFiles parses every Go file of the repository outside testdata/
// (with comments), once per test binary.
func repoFiles(t *testing.T) []goFile {
	t.Helper()
	if parsed != nil {
		return parsed
	}
	root := testutil.RepoRoot()
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if p != root && (name == "testdata" || strings.HasPrefix(name, ".") || name == "bin" || name == "demo") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") {
			return nil
		}
		src, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		f, err := parser.ParseFile(fset, p, src, parser.ParseComments)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		rel = filepath.ToSlash(rel)
		g := goFile{rel: rel, dir: filepath.ToSlash(filepath.Dir(rel)), test: strings.HasSuffix(name, "_test.go"), ast: f, fset: fset}
		for _, im := range f.Imports {
			v, _ := strconv.Unquote(im.Path.Value)
			g.imports = append(g.imports, v)
		}
		parsed = append(parsed, g)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(parsed) < 100 {
		t.Fatalf("only %d Go files under %s", len(parsed), root)
	}
	return parsed
}

var parsed []goFile

// under reports whether dir is prefix or inside it (slash paths).
func under(dir, prefix string) bool {
	return dir == prefix || strings.HasPrefix(dir, prefix+"/")
}
