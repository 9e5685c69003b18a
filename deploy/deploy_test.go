package deploy_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"
)

const (
	rulesFile     = "deploy/prometheus/fusebox-alerts.yml"
	rulesTestFile = "deploy/prometheus/fusebox-alerts.test.yml"
	dashboardFile = "deploy/grafana/fusebox-dashboard.json"
)

// The metric names of the external contract (DESIGN.md).
var contractMetrics = []string{
	"fusebox_circuit_breaker_executable_blocked_total",
	"fusebox_breaker_state",
	"fusebox_breaker_transitions_total",
	"fusebox_breaker_consecutive_failures",
}

// TestMetricsDocMatchesCode keeps docs/metrics.md in step with the metric
// names the code registers, in both directions.
func TestMetricsDocMatchesCode(t *testing.T) {
	ref, requested := docMetrics(t)
	code := codeMetrics(t)
	for _, name := range contractMetrics {
		if code[name] == "" {
			t.Errorf("contract metric %s is not registered by any package", name)
		}
	}
	var names []string
	for n := range code {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		switch {
		case requested[n]:
			t.Errorf("%s (registered in %s) is exported now: move it from \"Requested metrics\" into the reference in docs/metrics.md", n, code[n])
		case !ref[n]:
			t.Errorf("%s (registered in %s) is missing from docs/metrics.md", n, code[n])
		}
	}
	for n := range ref {
		if code[n] == "" {
			t.Errorf("docs/metrics.md documents %s, which no package registers (renamed or removed?)", n)
		}
	}
	for n := range requested {
		if ref[n] {
			t.Errorf("docs/metrics.md lists %s both in the reference and as requested", n)
		}
	}
}

// alertRule is one alert of the rules file, read textually (go.mod has no
// YAML parser; promtool parses the file for real in TestAlertRulesPromtool).
type alertRule struct {
	name, expr, forDur, severity, runbook string
	summary, description                  bool
}

var (
	alertStartRe = regexp.MustCompile(`^(\s*)- alert:\s*(\S+)\s*$`)
	ruleStartRe  = regexp.MustCompile(`^\s*- (alert|record):`)
	fieldRe      = regexp.MustCompile(`^\s*(expr|for|severity|summary|description|runbook):\s*(.*)$`)
)

func parseAlerts(t *testing.T) []alertRule {
	t.Helper()
	lines := strings.Split(readFile(t, rulesFile), "\n")
	var out []alertRule
	for i := 0; i < len(lines); i++ {
		m := alertStartRe.FindStringSubmatch(lines[i])
		if m == nil {
			continue
		}
		r := alertRule{name: m[2]}
		indent := len(m[1])
		var expr []string
		inExpr := false
		for j := i + 1; j < len(lines); j++ {
			l := lines[j]
			if strings.TrimSpace(l) == "" {
				continue
			}
			lead := len(l) - len(strings.TrimLeft(l, " "))
			if lead <= indent || ruleStartRe.MatchString(l) {
				break
			}
			f := fieldRe.FindStringSubmatch(l)
			if f == nil {
				if inExpr {
					expr = append(expr, strings.TrimSpace(l))
				}
				continue
			}
			inExpr = f[1] == "expr"
			val := strings.Trim(strings.TrimSpace(f[2]), `"`)
			switch f[1] {
			case "expr":
				if val != "|" && val != ">-" {
					expr = append(expr, val)
				}
			case "for":
				r.forDur = val
			case "severity":
				r.severity = val
			case "summary":
				r.summary = val != ""
			case "description":
				r.description = val != ""
			case "runbook":
				r.runbook = val
			}
		}
		r.expr = strings.Join(expr, " ")
		out = append(out, r)
	}
	if len(out) == 0 {
		t.Fatalf("%s: no alerts found", rulesFile)
	}
	return out
}

// TestAlertRulesStructure checks what promtool does not: every alert has a
// hold time, a severity, its annotations, a runbook section that exists, a
// unit test, and uses documented metrics only; and the alerts exist.
func TestAlertRulesStructure(t *testing.T) {
	ref, requested := docMetrics(t)
	known := map[string]bool{}
	for n := range ref {
		known[n] = true
	}
	for n := range requested {
		known[n] = true
	}
	ops := readFile(t, "docs/operations.md")
	opsAnchors := anchors(ops)
	unitTests := readFile(t, rulesTestFile)

	alerts := parseAlerts(t)
	byName := map[string]alertRule{}
	for _, r := range alerts {
		if _, dup := byName[r.name]; dup {
			t.Errorf("alert %s is defined twice", r.name)
		}
		byName[r.name] = r
		if r.expr == "" {
			t.Errorf("%s: no expr", r.name)
		}
		if _, err := time.ParseDuration(r.forDur); err != nil {
			t.Errorf("%s: for: %q is not a duration (every alert needs a hold time)", r.name, r.forDur)
		}
		if r.severity != "warning" && r.severity != "critical" {
			t.Errorf("%s: severity %q, want warning or critical", r.name, r.severity)
		}
		if !r.summary || !r.description {
			t.Errorf("%s: needs summary and description annotations", r.name)
		}
		anchor, ok := strings.CutPrefix(r.runbook, "docs/operations.md#")
		if !ok {
			t.Errorf("%s: runbook %q does not point at a section of docs/operations.md", r.name, r.runbook)
		} else if _, ok := opsAnchors[anchor]; !ok {
			t.Errorf("%s: runbook anchor #%s has no heading in docs/operations.md", r.name, anchor)
		}
		if !strings.Contains(unitTests, "alertname: "+r.name+"\n") {
			t.Errorf("%s: no unit test in %s", r.name, rulesTestFile)
		}
		for _, m := range exprMetrics(r.expr, known) {
			switch {
			case requested[m]:
				t.Logf("%s uses %s, documented as requested but not exported yet", r.name, m)
			case !ref[m]:
				t.Errorf("%s: expression uses %s, which docs/metrics.md does not document", r.name, m)
			}
		}
	}
	// Every runbook subsection belongs to an alert that exists.
	for _, line := range strings.Split(ops, "\n") {
		if name, ok := strings.CutPrefix(line, "### Fusebox"); ok {
			if _, exists := byName["Fusebox"+name]; !exists {
				t.Errorf("docs/operations.md has a runbook for Fusebox%s, which is not an alert", name)
			}
		}
	}
	// The alerts the operator-experience issue asks for, by the metric each
	// must watch.
	for _, want := range []struct{ alert, metric string }{
		{"FuseboxBreakerOpen", "fusebox_breaker_state"},
		{"FuseboxManyBreakersOpen", "fusebox_breaker_state"},
		{"FuseboxNodeSuspectsItself", "fusebox_node_suspect"},
		{"FuseboxHintsNotFlowing", "fusebox_hints_sent_total"},
		{"FuseboxHintErrors", "fusebox_hints_received_total"},
		{"FuseboxShardWithoutOwner", "fusebox_shards_owned"},
		{"FuseboxNoRaftLeader", "fusebox_raft_state"},
		{"FuseboxQueueBacklogGrowing", "fusebox_queue_depth"},
		{"FuseboxMemberDead", "fusebox_cluster_members"},
	} {
		r, ok := byName[want.alert]
		if !ok {
			t.Errorf("alert %s is missing", want.alert)
			continue
		}
		if !strings.Contains(r.expr, want.metric) {
			t.Errorf("%s: expression %q does not use %s", want.alert, r.expr, want.metric)
		}
	}
}

// TestAlertRulesPromtool validates the rules and runs their unit tests.
func TestAlertRulesPromtool(t *testing.T) {
	pt := promtool(t)
	dir := filepath.Join(root, "deploy", "prometheus")
	if out, err := run(t, dir, pt, "check", "rules", filepath.Base(rulesFile)); err != nil {
		t.Fatalf("promtool check rules: %v\n%s", err, out)
	}
	if out, err := run(t, dir, pt, "test", "rules", filepath.Base(rulesTestFile)); err != nil {
		t.Fatalf("promtool test rules: %v\n%s", err, out)
	}
}

// dashboard is the part of a Grafana dashboard the test reads.
type dashboard struct {
	UID        string  `json:"uid"`
	Title      string  `json:"title"`
	Panels     []panel `json:"panels"`
	Templating struct {
		List []struct {
			Name       string `json:"name"`
			Type       string `json:"type"`
			Definition string `json:"definition"`
		} `json:"list"`
	} `json:"templating"`
}

type panel struct {
	ID         *int   `json:"id"`
	Type       string `json:"type"`
	Title      string `json:"title"`
	Datasource *struct {
		UID string `json:"uid"`
	} `json:"datasource"`
	GridPos struct{ X, Y, W, H int } `json:"gridPos"`
	Targets []struct {
		Expr  string `json:"expr"`
		RefID string `json:"refId"`
	} `json:"targets"`
	Panels []panel `json:"panels"`
}

func loadDashboard(t *testing.T) dashboard {
	t.Helper()
	raw := readFile(t, dashboardFile)
	if !json.Valid([]byte(raw)) {
		t.Fatalf("%s is not valid JSON", dashboardFile)
	}
	var d dashboard
	if err := json.Unmarshal([]byte(raw), &d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	return d
}

func flatten(ps []panel) []panel {
	var out []panel
	for _, p := range ps {
		out = append(out, p)
		out = append(out, flatten(p.Panels)...)
	}
	return out
}

// TestDashboard checks the dashboard's JSON, unique panel ids, and that
// every query reads only documented, exported fusebox metrics.
func TestDashboard(t *testing.T) {
	d := loadDashboard(t)
	ref, _ := docMetrics(t)
	if d.UID == "" || d.Title == "" {
		t.Errorf("dashboard needs a uid and a title")
	}
	ids := map[int]string{}
	used := map[string]bool{}
	check := func(where, expr string) {
		for _, m := range exprMetrics(expr, ref) {
			used[m] = true
			if !ref[m] {
				t.Errorf("%s: %s is not an exported metric documented in docs/metrics.md", where, m)
			}
		}
	}
	panels := flatten(d.Panels)
	if len(panels) == 0 {
		t.Fatal("dashboard has no panels")
	}
	for _, p := range panels {
		if p.ID == nil {
			t.Errorf("panel %q has no id", p.Title)
			continue
		}
		if prev, dup := ids[*p.ID]; dup {
			t.Errorf("panel id %d is used by %q and %q", *p.ID, prev, p.Title)
		}
		ids[*p.ID] = p.Title
		if p.GridPos.W <= 0 || p.GridPos.H <= 0 || p.GridPos.X+p.GridPos.W > 24 {
			t.Errorf("panel %q: gridPos %+v outside the 24-column grid", p.Title, p.GridPos)
		}
		if p.Type == "row" {
			continue
		}
		if p.Datasource == nil || p.Datasource.UID != "${datasource}" {
			t.Errorf("panel %q: datasource must be the ${datasource} variable", p.Title)
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no queries", p.Title)
		}
		for _, tg := range p.Targets {
			if strings.TrimSpace(tg.Expr) == "" {
				t.Errorf("panel %q: query %s is empty", p.Title, tg.RefID)
			}
			check(fmt.Sprintf("panel %q query %s", p.Title, tg.RefID), tg.Expr)
		}
	}
	for _, v := range d.Templating.List {
		if v.Type == "query" {
			check("variable "+v.Name, v.Definition)
		}
	}
	// The views the issue asks for.
	for _, m := range []string{
		"fusebox_breaker_state", "fusebox_breaker_transitions_total", "fusebox_circuit_breaker_executable_blocked_total",
		"fusebox_hints_sent_total", "fusebox_hints_received_total", "fusebox_queue_depth",
		"fusebox_queue_enqueue_to_first_attempt_seconds", "fusebox_raft_state", "fusebox_cluster_members",
	} {
		if !used[m] {
			t.Errorf("dashboard has no panel over %s", m)
		}
	}
}

var grafanaVarRe = regexp.MustCompile(`\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?`)

// TestDashboardQueriesParse has promtool parse every dashboard query, with
// Grafana's variables substituted, as a recording rule.
func TestDashboardQueriesParse(t *testing.T) {
	pt := promtool(t)
	d := loadDashboard(t)
	var b strings.Builder
	b.WriteString("groups:\n  - name: dashboard\n    rules:\n")
	n := 0
	for _, p := range flatten(d.Panels) {
		for _, tg := range p.Targets {
			expr := grafanaVarRe.ReplaceAllStringFunc(tg.Expr, func(v string) string {
				switch strings.Trim(v, "${}") {
				case "__rate_interval", "__interval", "__range":
					return "5m"
				}
				return "x"
			})
			n++
			fmt.Fprintf(&b, "      - record: dashboard:panel_%d_%s\n        expr: |\n", *p.ID, tg.RefID)
			for _, l := range strings.Split(expr, "\n") {
				b.WriteString("          " + l + "\n")
			}
		}
	}
	path := filepath.Join(t.TempDir(), "dashboard-rules.yml")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := run(t, ".", pt, "check", "rules", path)
	if err != nil {
		t.Fatalf("promtool rejects dashboard queries: %v\n%s", err, out)
	}
	if want := fmt.Sprintf("%d rules found", n); !strings.Contains(out, want) {
		t.Fatalf("promtool checked a different number of queries than the %d in the dashboard:\n%s", n, out)
	}
}

// TestInstallTools checks the script's syntax and, where promtool is
// already installed, that it is a quiet no-op.
func TestInstallTools(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh on PATH")
	}
	script := filepath.Join(root, "deploy", "install-tools.sh")
	if out, err := run(t, ".", sh, "-n", script); err != nil {
		t.Fatalf("sh -n install-tools.sh: %v\n%s", err, out)
	}
	if _, err := exec.LookPath("promtool"); err != nil {
		t.Skip("promtool not installed; not running install-tools.sh from a test")
	}
	out, err := run(t, ".", sh, script)
	if err != nil || out != "" {
		t.Fatalf("install-tools.sh with promtool present: err=%v, output %q; want a silent no-op", err, out)
	}
}
