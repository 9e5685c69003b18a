package archtest

import (
	"go/ast"
	"slices"
	"testing"
)

// TestGoroutinePackagesCheckForLeaks: a package whose code starts a
// goroutine runs its tests under goleak.VerifyTestMain, so a goroutine
// left running after the tests (a Close that does not wait, a loop with no
// stop) fails the package. pgstore starts a notifier and a listener and had
// no such check.
func TestGoroutinePackagesCheckForLeaks(t *testing.T) {
	starts := map[string]bool{}  // package dirs whose non-test code has a go statement
	checked := map[string]bool{} // package dirs whose tests call goleak.VerifyTestMain
	walkGoFiles(t, func(dir string, test bool, f *ast.File) {
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.GoStmt:
				if !test {
					starts[dir] = true
				}
			case *ast.SelectorExpr:
				if id, ok := n.X.(*ast.Ident); ok && test && id.Name == "goleak" && n.Sel.Name == "VerifyTestMain" {
					checked[dir] = true
				}
			}
			return true
		})
	})
	if len(starts) < 5 || len(checked) < 5 {
		t.Fatalf("found goroutines in %d packages and leak checks in %d: the walk is not reading the tree", len(starts), len(checked))
	}
	var missing []string
	for dir := range starts {
		if !checked[dir] {
			missing = append(missing, dir)
		}
	}
	slices.Sort(missing)
	if len(missing) > 0 {
		t.Fatalf("these packages start goroutines but their tests do not run under goleak.VerifyTestMain: %v", missing)
	}
}
