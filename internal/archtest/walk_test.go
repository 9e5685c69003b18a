package archtest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// repoRoot is the module's root, seen from this package's directory.
const repoRoot = "../.."

// walkGoFiles parses every .go file of the tree (not testdata, hidden
// directories, bin or data) and calls fn with its directory relative to
// the root ("./node"), whether it is a test file, and its syntax.
func walkGoFiles(t *testing.T, fn func(dir string, test bool, f *ast.File)) {
	t.Helper()
	fset := token.NewFileSet()
	err := filepath.WalkDir(repoRoot, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != repoRoot && (strings.HasPrefix(name, ".") || name == "testdata" || name == "bin" || name == "data") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(repoRoot, filepath.Dir(path))
		if err != nil {
			return err
		}
		fn("./"+filepath.ToSlash(rel), strings.HasSuffix(path, "_test.go"), f)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
