package archtest

import (
	"bufio"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

const (
	module  = "fusebox"
	binary  = "cmd/node"
	docPath = "../../docs/architecture.md"
	// marker precedes the fenced block that holds the diagram.
	marker = "<!-- import diagram: kept true by internal/archtest -->"
)

// TestImportDiagram holds docs/architecture.md's import diagram to the code:
// one line per package the binary is built from, "pkg -> its direct fusebox
// imports", internal/* packages left out as leaves. A new edge or package
// that the diagram does not show fails, and so does one it shows that is
// gone. The failure prints the diagram as the code has it.
func TestImportDiagram(t *testing.T) {
	want := graphOfBinary(t, "../..")
	if len(want[binary]) == 0 || len(want) < 5 {
		t.Fatalf("the walk from %s found only %v: the parser is not reading the tree", binary, want)
	}
	got := diagramInDoc(t, docPath)
	wantText, gotText := render(want), render(got)
	if wantText != gotText {
		t.Fatalf("docs/architecture.md's import diagram is out of date.\n--- the doc has:\n%s--- the code has (paste it after %q):\n%s", gotText, marker, wantText)
	}
}

// graphOfBinary parses the imports of every non-test Go file reachable from
// the binary's package and returns package -> direct fusebox imports.
func graphOfBinary(t *testing.T, root string) map[string][]string {
	t.Helper()
	graph := map[string][]string{}
	queue := []string{binary}
	seen := map[string]bool{binary: true}
	for len(queue) > 0 {
		pkg := queue[0]
		queue = queue[1:]
		deps := importsOf(t, filepath.Join(root, filepath.FromSlash(pkg)))
		for _, d := range deps {
			if !seen[d] {
				seen[d] = true
				queue = append(queue, d)
			}
		}
		if !strings.HasPrefix(pkg, "internal/") {
			var shown []string
			for _, d := range deps {
				if !strings.HasPrefix(d, "internal/") {
					shown = append(shown, d)
				}
			}
			graph[pkg] = shown
		}
	}
	return graph
}

// importsOf returns the sorted fusebox imports (module prefix cut) of the
// non-test files in dir.
func importsOf(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	set := map[string]bool{}
	fset := token.NewFileSet()
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			p := strings.Trim(imp.Path.Value, `"`)
			if rest, ok := strings.CutPrefix(p, module+"/"); ok {
				set[rest] = true
			}
		}
	}
	out := make([]string, 0, len(set))
	for p := range set {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}

// diagramInDoc reads the fenced block after marker: lines "pkg -> a b c"
// (or "pkg ->" for a package with no fusebox imports).
func diagramInDoc(t *testing.T, path string) map[string][]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	state := 0 // 0 before marker, 1 before fence, 2 inside
	graph := map[string][]string{}
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case state == 0 && line == marker:
			state = 1
		case state == 1 && strings.HasPrefix(line, "```"):
			state = 2
		case state == 2 && strings.HasPrefix(line, "```"):
			return graph
		case state == 2 && line != "":
			pkg, deps, ok := strings.Cut(line, "->")
			if !ok {
				t.Fatalf("%s: diagram line %q has no \"->\"", path, line)
			}
			graph[strings.TrimSpace(pkg)] = strings.Fields(deps)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	t.Fatalf("%s: no fenced import diagram after %q", path, marker)
	return nil
}

func render(g map[string][]string) string {
	pkgs := make([]string, 0, len(g))
	for p := range g {
		pkgs = append(pkgs, p)
	}
	sort.Strings(pkgs)
	var b strings.Builder
	for _, p := range pkgs {
		deps := append([]string(nil), g[p]...)
		sort.Strings(deps)
		b.WriteString(p + " ->")
		for _, d := range deps {
			b.WriteString(" " + d)
		}
		b.WriteString("\n")
	}
	return b.String()
}
