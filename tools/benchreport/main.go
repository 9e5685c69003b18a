// Command benchreport runs fusebox's benchmarks (each beside the baseline
// measured in the same run), prints one table and writes
// docs/benchmarks.md. `make bench` runs it; BENCH_QUICK=1 runs a short
// profile. Every cluster a benchmark starts lives on loopback and is torn
// down by the benchmark itself.
package main

import (
	"bufio"
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"time"
)

func main() {
	out := flag.String("out", "docs/benchmarks.md", "markdown report to write ('' to skip)")
	quick := flag.Bool("quick", os.Getenv("BENCH_QUICK") != "", "short profile (also BENCH_QUICK=1)")
	only := flag.String("only", "", "regexp: run only rows whose package or benchmark matches")
	timeout := flag.Duration("timeout", 60*time.Minute, "bound on the whole run (the issue 18 process rows alone take about 12 minutes)")
	flag.Parse()

	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	sel := rows
	if *only != "" {
		re := regexp.MustCompile(*only)
		sel = nil
		for _, r := range rows {
			if re.MatchString(r.Pkg) || re.MatchString(r.Bench) {
				sel = append(sel, r)
			}
		}
	}
	results, cmds, steal := run(ctx, sel, *quick)
	report := render(sel, results, cmds, *quick, steal)
	fmt.Print(report.table)
	if *out != "" {
		prev, _ := os.ReadFile(*out) // none yet: a fresh report
		md := mergeReport(string(prev), report.markdown, *only != "", *only, stealNote(steal), knownRows())
		if err := os.WriteFile(*out, []byte(md), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "benchreport:", err)
			os.Exit(1)
		}
		fmt.Printf("\nwrote %s\n", *out)
	}
}

// run groups rows by package, benchtime and top-level benchmark (a row's
// baseline runs in its row's `go test`), runs each group (Runs times for
// rows that ask for it, the repetitions of all groups interleaved) and
// parses every benchmark line into name → metric → value, the median of
// the runs. steal is the share of the machine's CPU time the hypervisor
// took while the commands ran (-1 if unknown).
func run(ctx context.Context, sel []row, quick bool) (results map[string]map[string]float64, cmds map[string]string, steal float64) {
	type group struct {
		pkg, time string
		runs      int
		names     map[string]bool
		targets   [][2]string // benchmark and metric of the rows with a target
	}
	groups := map[string]*group{}
	var order []string
	for _, r := range sel {
		t := r.Time
		if quick {
			t = r.QuickTime
		}
		if t == "-" {
			continue
		}
		// One run per top-level benchmark: a multi-level -bench pattern
		// would skip benchmarks that have no sub-benchmarks.
		top, _, _ := strings.Cut(r.Bench, "/")
		k := r.Pkg + " " + t + " " + top
		g, ok := groups[k]
		if !ok {
			g = &group{pkg: r.Pkg, time: t, runs: 1, names: map[string]bool{}}
			groups[k] = g
			order = append(order, k)
		}
		g.names[r.Bench] = true
		if r.Target != "" {
			g.targets = append(g.targets, [2]string{r.Bench, r.Metric})
		}
		if r.Runs > g.runs && !quick {
			g.runs = r.Runs
		}
		if r.Baseline != "" {
			g.names[r.Baseline] = true
		}
	}
	samples := map[string]map[string][]float64{}
	cmds = map[string]string{}
	var meter stealMeter
	maxRuns := 1
	for _, g := range groups {
		maxRuns = max(maxRuns, g.runs)
	}
	for i := range maxRuns {
		for _, k := range order {
			g := groups[k]
			if i >= g.runs {
				continue
			}
			pattern := benchPattern(g.names)
			args := []string{"test", "-run", "^$", "-bench", pattern, "-benchmem", "-benchtime", g.time, "-count", "1", "-timeout", "30m", g.pkg}
			cmd := "go " + strings.Join(quoteArgs(args), " ")
			if g.runs > 1 {
				fmt.Fprintf(os.Stderr, "» (run %d of %d) %s\n", i+1, g.runs, cmd)
			} else {
				fmt.Fprintf(os.Stderr, "» %s\n", cmd)
			}
			c := exec.CommandContext(ctx, "go", args...)
			var buf bytes.Buffer
			c.Stdout, c.Stderr = &buf, os.Stderr
			var err error
			if sh := meter.measure(func() { err = c.Run() }); sh >= 0 {
				fmt.Fprintf(os.Stderr, "  (hypervisor steal %.0f %% of the CPU time during it)\n", 100*sh)
			}
			had := make([]int, len(g.targets)) // samples before this run: did it add one?
			for i, t := range g.targets {
				had[i] = len(samples[g.pkg+" "+t[0]][t[1]])
			}
			parse(g.pkg, buf.Bytes(), samples)
			if g.runs > 1 {
				cmd += fmt.Sprintf(" (median of %d runs)", g.runs)
				// Each run's value of the rows with a target, so a median
				// that meets one can be read with its spread.
				for i, t := range g.targets {
					if vs := samples[g.pkg+" "+t[0]][t[1]]; len(vs) > had[i] {
						fmt.Fprintf(os.Stderr, "  this run: %s %s %.4g\n", t[0], t[1], vs[len(vs)-1])
					}
				}
			}
			for n := range g.names {
				cmds[g.pkg+" "+n] = cmd
			}
			if err != nil {
				fmt.Fprintf(os.Stderr, "benchreport: %s: %v\n%s", g.pkg, err, buf.String())
			}
		}
	}
	results = map[string]map[string]float64{}
	for name, ms := range samples {
		results[name] = map[string]float64{}
		for m, vs := range ms {
			results[name][m] = median(vs)
		}
	}
	return results, cmds, meter.share()
}

// median of vs (which is not empty); the mean of the middle two for an
// even count.
func median(vs []float64) float64 {
	s := append([]float64(nil), vs...)
	sort.Float64s(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// benchPattern builds a -bench regexp matching exactly the named
// (sub-)benchmarks: go test splits the pattern on '/' per level.
func benchPattern(names map[string]bool) string {
	levels := []map[string]bool{}
	for n := range names {
		for i, part := range strings.Split(n, "/") {
			if i >= len(levels) {
				levels = append(levels, map[string]bool{})
			}
			levels[i][regexp.QuoteMeta(part)] = true
		}
	}
	parts := make([]string, len(levels))
	for i, l := range levels {
		alts := make([]string, 0, len(l))
		for a := range l {
			alts = append(alts, a)
		}
		sort.Strings(alts)
		parts[i] = "^(" + strings.Join(alts, "|") + ")$"
	}
	return strings.Join(parts, "/")
}

var procSuffix = regexp.MustCompile(`-\d+$`)

func parse(pkg string, out []byte, samples map[string]map[string][]float64) {
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") {
			continue
		}
		name := pkg + " " + procSuffix.ReplaceAllString(f[0], "")
		m := samples[name]
		if m == nil {
			m = map[string][]float64{}
			samples[name] = m
		}
		for i := 2; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				break
			}
			m[f[i+1]] = append(m[f[i+1]], v)
		}
	}
}

func quoteArgs(args []string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		if strings.ContainsAny(a, "^$|()*") {
			a = "'" + a + "'"
		}
		out[i] = a
	}
	return out
}

type rendered struct{ table, markdown string }

func render(sel []row, results map[string]map[string]float64, cmds map[string]string, quick bool, steal float64) rendered {
	var tb, md strings.Builder
	fmt.Fprintf(&tb, "%-5s %-52s %14s %14s %8s %-12s %s\n", "issue", "figure", "value", "baseline", "ratio", "target", "ok")
	profile := "full"
	if quick {
		profile = "quick (BENCH_QUICK=1)"
	}
	fmt.Fprintf(&md, "# Benchmarks\n\nGenerated by `make bench` (profile: %s) on %s.\n\n", profile, time.Now().UTC().Format("2006-01-02 15:04 MST"))
	fmt.Fprintf(&md, "- Machine: %s, %d CPUs (%s/%s); shared and noisy, so read ratios, not absolute figures.\n", cpuModel(), runtime.NumCPU(), runtime.GOOS, runtime.GOARCH)
	fmt.Fprintf(&md, "- Go: %s\n", goVersion())
	if n := stealNote(steal); n != "" {
		fmt.Fprintf(&md, "- During this run: %s.\n", n)
	}
	md.WriteString("\n")
	md.WriteString("Each baseline is measured in the same `go test` run as its figure. `ok` compares with the target the issue set.\n\n")
	md.WriteString(preamble)
	md.WriteString(tableHeader + "\n|---|---|---|---|---|---|---|---|\n")
	for _, r := range sel {
		val, hasVal := lookup(results, r.Pkg, r.Bench, r.Metric)
		base, hasBase := lookup(results, r.Pkg, r.Baseline, r.Metric)
		ratio, hasRatio := 0.0, hasVal && hasBase && base != 0
		if hasRatio {
			ratio = val / base
		}
		ok := check(r.Target, val, hasVal, ratio, hasRatio)
		vs, bs, rs := "-", "-", "-"
		if hasVal {
			vs = fmt.Sprintf("%.4g %s", val, r.Metric)
		} else {
			vs = "not run"
		}
		if hasBase {
			bs = fmt.Sprintf("%.4g", base)
		}
		if hasRatio {
			rs = fmt.Sprintf("%.2f×", ratio)
		}
		fmt.Fprintf(&tb, "%-5s %-52s %14s %14s %8s %-12s %s\n", r.Issue, trunc(r.What, 52), vs, bs, rs, r.Target, ok)
		cmd := cmds[r.Pkg+" "+r.Bench]
		fmt.Fprintf(&md, "| %s | %s | %s | %s | %s | %s | %s | `%s` |\n", r.Issue, r.What, vs, bs, rs, orDash(r.Target), ok, strings.ReplaceAll(cmd, "|", "\\|"))
	}
	return rendered{tb.String(), md.String()}
}

func lookup(results map[string]map[string]float64, pkg, bench, metric string) (float64, bool) {
	if bench == "" {
		return 0, false
	}
	m, ok := results[pkg+" "+bench]
	if !ok {
		return 0, false
	}
	v, ok := m[metric]
	return v, ok
}

func check(target string, val float64, hasVal bool, ratio float64, hasRatio bool) string {
	if target == "" {
		return ""
	}
	kind, lim, found := strings.Cut(target, "<=")
	op := "<="
	if !found {
		kind, lim, found = strings.Cut(target, ">=")
		op = ">="
	}
	limit, err := strconv.ParseFloat(lim, 64)
	if !found || err != nil {
		return "?"
	}
	var x float64
	switch {
	case kind == "ratio" && hasRatio:
		x = ratio
	case kind == "value" && hasVal:
		x = val
	default:
		return "-"
	}
	if (op == "<=" && x <= limit) || (op == ">=" && x >= limit) {
		return "yes"
	}
	return "NO"
}

func cpuModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
				return strings.TrimSpace(v)
			}
		}
	}
	return "unknown CPU"
}

func goVersion() string {
	out, err := exec.Command("go", "version").Output()
	if err != nil {
		return runtime.Version()
	}
	return strings.TrimSpace(string(out))
}

func trunc(s string, n int) string {
	if len([]rune(s)) <= n {
		return s
	}
	return string([]rune(s)[:n-1]) + "…"
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
