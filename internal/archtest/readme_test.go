package archtest

import (
	"go/ast"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// TestReadmeLayoutNamesEveryFolder keeps README.md's "Layout" table true:
// every top-level folder that holds Go code has a row (`folder/`), and
// every row names a folder that exists.
func TestReadmeLayoutNamesEveryFolder(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(repoRoot, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, layout, ok := strings.Cut(string(b), "\n## Layout\n")
	if !ok {
		t.Fatal(`README.md has no "## Layout" section`)
	}
	layout, _, _ = strings.Cut(layout, "\n## ")
	rows := map[string]bool{}
	for _, m := range regexp.MustCompile("(?m)^\\| `([^`]+)/` \\|").FindAllStringSubmatch(layout, -1) {
		rows[m[1]] = true
	}
	withGo := map[string]bool{}
	walkGoFiles(t, func(dir string, _ bool, _ *ast.File) {
		if top, _, _ := strings.Cut(strings.TrimPrefix(dir, "./"), "/"); top != "." && top != "" {
			withGo[top] = true
		}
	})
	var missing, stale []string
	for d := range withGo {
		if !rows[d] && !hasRowUnder(rows, d) {
			missing = append(missing, d+"/")
		}
	}
	for r := range rows {
		if st, err := os.Stat(filepath.Join(repoRoot, r)); err != nil || !st.IsDir() {
			stale = append(stale, r+"/")
		}
	}
	sort.Strings(missing)
	sort.Strings(stale)
	if len(missing) > 0 || len(stale) > 0 {
		t.Fatalf("README.md's Layout table: folders with Go code and no row %v; rows naming no folder %v", missing, stale)
	}
}

// hasRowUnder reports whether a row names a folder inside top (a top-level
// folder described by its sub-folders' rows, such as test/e2e/).
func hasRowUnder(rows map[string]bool, top string) bool {
	for r := range rows {
		if strings.HasPrefix(r, top+"/") {
			return true
		}
	}
	return false
}
