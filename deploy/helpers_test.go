package deploy_test

import (
	"bytes"
	"context"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"
)

// root is the module root, relative to this package's directory (where go
// test runs).
const root = ".."

func readFile(t *testing.T, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, rel))
	if err != nil {
		t.Fatalf("reading %s: %v", rel, err)
	}
	return string(b)
}

var (
	metricRe     = regexp.MustCompile(`\bfusebox_[a-z0-9_]*[a-z0-9]`)
	codeMetricRe = regexp.MustCompile(`"(fusebox_[a-z0-9_]+)"`)
	docRowRe     = regexp.MustCompile("^\\| `(fusebox_[a-z0-9_]+)` \\|")
	flagDefRe    = regexp.MustCompile(`\.(?:String|Int|Bool|Duration)Var\(&[^,]+,\s*"([a-z0-9-]+)"`)
	headingRe    = regexp.MustCompile(`^(#{1,6})\s+(.*?)\s*$`)
)

// docMetrics parses docs/metrics.md: the metric names of the reference
// tables, and those of the "Requested" section (documented, not exported).
func docMetrics(t *testing.T) (reference, requested map[string]bool) {
	t.Helper()
	reference, requested = map[string]bool{}, map[string]bool{}
	inRequested := false
	for _, line := range strings.Split(readFile(t, "docs/metrics.md"), "\n") {
		if strings.HasPrefix(line, "## ") {
			inRequested = strings.HasPrefix(line, "## Requested")
			continue
		}
		m := docRowRe.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		set := reference
		if inRequested {
			set = requested
		}
		if set[m[1]] {
			t.Errorf("docs/metrics.md: %s is listed twice", m[1])
		}
		set[m[1]] = true
	}
	if len(reference) == 0 {
		t.Fatal("docs/metrics.md: no metric rows (| `fusebox_…` |) found")
	}
	return reference, requested
}

// codeMetrics returns every fusebox_* string literal in the module's
// non-test Go files, with the file that registers it.
func codeMetrics(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			name := d.Name()
			if path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "vendor" || name == "deploy" || name == "test") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range codeMetricRe.FindAllStringSubmatch(string(b), -1) {
			rel, _ := filepath.Rel(root, path)
			out[m[1]] = rel
		}
		return nil
	})
	if err != nil {
		t.Fatalf("scanning the module for metric names: %v", err)
	}
	return out
}

// exprMetrics returns the metric families a PromQL expression reads:
// histogram suffixes are stripped when the family is known.
func exprMetrics(expr string, known map[string]bool) []string {
	seen := map[string]bool{}
	for _, name := range metricRe.FindAllString(expr, -1) {
		for _, suf := range []string{"_bucket", "_sum", "_count"} {
			if base, ok := strings.CutSuffix(name, suf); ok && known[base] {
				name = base
				break
			}
		}
		seen[name] = true
	}
	out := make([]string, 0, len(seen))
	for n := range seen {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// serveFlags returns the long flag names `fusebox serve` defines.
func serveFlags(t *testing.T) map[string]bool {
	t.Helper()
	flags := map[string]bool{}
	for _, m := range flagDefRe.FindAllStringSubmatch(readFile(t, "cmd/node/serve.go"), -1) {
		flags[m[1]] = true
	}
	// serve's TLS flags are defined beside the `fusebox tls` commands.
	for _, m := range flagDefRe.FindAllStringSubmatch(readFile(t, "cmd/node/tls.go"), -1) {
		if strings.HasPrefix(m[1], "tls-") || m[1] == "insecure" {
			flags[m[1]] = true
		}
	}
	// The external contract (DESIGN.md) names these; if the parse finds
	// none of them, the pattern is stale, not the artifacts.
	for _, f := range []string{"node-id", "data-dir", "join", "bootstrap-expect", "shutdown-timeout"} {
		if !flags[f] {
			t.Fatalf("cmd/node/serve.go: flag --%s not found (found %v); update flagDefRe", f, flags)
		}
	}
	return flags
}

// envFlag maps FUSEBOX_<NAME> to the serve flag it sets, as cmd/node does.
func envFlag(env string) (string, bool) {
	name, ok := strings.CutPrefix(env, "FUSEBOX_")
	if !ok {
		return "", false
	}
	return strings.ToLower(strings.ReplaceAll(name, "_", "-")), true
}

// anchors returns the GitHub anchors of a Markdown file's headings.
func anchors(md string) map[string]string {
	out := map[string]string{}
	inFence := false
	for _, line := range strings.Split(md, "\n") {
		if strings.HasPrefix(line, "```") {
			inFence = !inFence
			continue
		}
		m := headingRe.FindStringSubmatch(line)
		if inFence || m == nil {
			continue
		}
		out[slug(m[2])] = line
	}
	return out
}

func slug(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-', r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteByte('-')
		}
	}
	return b.String()
}

// promtool returns promtool's path. Without it the test is skipped, except
// in CI (CI set), where the artifacts must be checked.
func promtool(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("promtool")
	if err == nil {
		return p
	}
	if os.Getenv("CI") != "" {
		t.Fatal("promtool is not on PATH and CI is set: CI must check the alert rules; run deploy/install-tools.sh first")
	}
	t.Skip("promtool is not on PATH; run deploy/install-tools.sh to check the rules with it")
	return ""
}

// run runs a command in dir with a deadline and returns its combined output.
func run(t *testing.T, dir string, name string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}
