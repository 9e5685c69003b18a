package archtest

import (
	"go/ast"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestMakeFuzzRunsEveryTarget holds the Makefile's FUZZ_TARGETS to the
// code: `make fuzz` runs every fuzz function of the tree ("pkgdir:FuzzName")
// and none that is gone. Six targets had been written without being added
// to the list, so `make fuzz` never ran them.
func TestMakeFuzzRunsEveryTarget(t *testing.T) {
	var want []string
	walkGoFiles(t, func(dir string, test bool, f *ast.File) {
		if !test {
			return
		}
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if ok && fn.Recv == nil && strings.HasPrefix(fn.Name.Name, "Fuzz") {
				want = append(want, dir+":"+fn.Name.Name)
			}
		}
	})
	if len(want) < 10 {
		t.Fatalf("found only %v: the walk is not reading the tree", want)
	}
	b, err := os.ReadFile(filepath.Join(repoRoot, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^FUZZ_TARGETS\s*:?=((?:.*\\\n)*.*)$`).FindSubmatch(b)
	if m == nil {
		t.Fatal("the Makefile has no FUZZ_TARGETS line")
	}
	got := strings.Fields(strings.ReplaceAll(string(m[1]), "\\\n", " "))
	slices.Sort(want)
	slices.Sort(got)
	if !slices.Equal(got, want) {
		var missing, stale []string
		for _, w := range want {
			if !slices.Contains(got, w) {
				missing = append(missing, w)
			}
		}
		for _, g := range got {
			if !slices.Contains(want, g) {
				stale = append(stale, g)
			}
		}
		t.Fatalf("the Makefile's FUZZ_TARGETS is out of date: missing %v, not in the code %v", missing, stale)
	}
}
