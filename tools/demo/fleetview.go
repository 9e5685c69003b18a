package main

import (
	"fmt"
	"sort"
	"strings"
	"text/tabwriter"
	"time"
)

// writeFleet is the view's section on the fleet features: one line per
// feature, then one row per node.
func writeFleet(b *strings.Builder, f fleetView, nodes []string, now time.Duration) {
	b.WriteString("FLEET FEATURES\n")
	b.WriteString("  " + throttleHeadline(f.Throttle, now) + "\n")
	if bd := f.Budget; bd.BudgetRPS > 0 {
		fmt.Fprintf(b, "  fleet budget: healthy %s/s for the whole fleet (fusebox.destination.fleetRPS) · measured %s\n",
			fmtRPS(bd.BudgetRPS), measuredText(bd))
	} else {
		b.WriteString("  fleet budget: none (--fleet-rps 0)\n")
	}
	if h := f.Health; h.Interval > 0 {
		fmt.Fprintf(b, "  health checks: flaky GET /health every %v · during the outage %d tasks spent probing (target 0), %d health checks\n",
			h.Interval, h.TaskProbes, h.ChecksInOutage)
	} else {
		b.WriteString("  health checks: none (--health-interval 0): open breakers probe with real tasks\n")
	}
	tw := tabwriter.NewWriter(b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  node\tflaky held until (Retry-After)\tcalls in the hold\thealthy budget share\tflaky's last health check")
	for _, n := range nodes {
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\n", n, holdText(f.Throttle, n), holdCalls(f.Throttle, n), shareText(f.Budget, n), lastHealthText(f.Health, n))
	}
	tw.Flush()
}

func throttleHeadline(t throttleView, now time.Duration) string {
	ra := fmt.Sprintf(`429 "Retry-After: %d"`, int(t.For/time.Second))
	switch t.Phase {
	case throttleNone:
		return "Retry-After: no 429 phase (--retry-after 0)"
	case throttleScheduled:
		return fmt.Sprintf("Retry-After: flaky answers %s at %s for %v — in %.0fs", ra, fmtT(t.At), t.For, (t.At - now).Seconds())
	}
	verb := "answers"
	if t.Phase == throttleOver {
		verb = "answered"
	}
	return fmt.Sprintf("Retry-After: flaky %s %s from %s for %v\n"+
		"    %d calls reached it in the hold (target ≤ 1 per node); the nodes' deadlines within %.1fs",
		verb, ra, fmtT(t.At), t.For, t.TotalCalls, t.Spread().Seconds())
}

func holdText(t throttleView, node string) string {
	if u, ok := t.Until[node]; ok {
		return fmtT(u)
	}
	return "-"
}

func holdCalls(t throttleView, node string) string {
	if c, ok := t.Calls[node]; ok {
		return fmt.Sprint(c)
	}
	return "-"
}

func shareText(bd budgetView, node string) string {
	for _, n := range bd.Nodes {
		if n.Node == node {
			return fmt.Sprintf("%.0f%% = %s/s (backlog %d)", 100*n.Share, fmtRPS(n.RPS), n.Backlog)
		}
	}
	return "-"
}

func lastHealthText(h healthView, node string) string {
	if l, ok := h.Last[node]; ok {
		return fmt.Sprintf("%s %s (%s)", fmtT(l.At), l.Result, l.Role)
	}
	return "-"
}

func measuredText(bd budgetView) string {
	if bd.Window == 0 {
		return "(not yet)"
	}
	return fmt.Sprintf("%.1f/s over the last %.0fs", bd.MeasuredRPS, bd.Window.Seconds())
}

func fmtRPS(v float64) string {
	if v == float64(int64(v)) {
		return fmt.Sprint(int64(v))
	}
	return fmt.Sprintf("%.1f", v)
}

// fleetLine is the status line's part: the hold, the budget, the health
// checks, each when there is something to say.
func fleetLine(f fleetView) string {
	var parts []string
	if t := f.Throttle; t.Phase == throttleOn || t.Phase == throttleOver {
		held := make([]string, 0, len(t.Until))
		for _, n := range sortedNodes(t.Until) {
			held = append(held, n+":"+fmtT(t.Until[n]))
		}
		parts = append(parts, fmt.Sprintf("429 %s: held %s, %d calls", t.Phase, orDash(strings.Join(held, " ")), t.TotalCalls))
	}
	if bd := f.Budget; bd.BudgetRPS > 0 {
		s := fmt.Sprintf("budget %s/s measured %s", fmtRPS(bd.BudgetRPS), measuredText(bd))
		for _, n := range bd.Nodes {
			s += fmt.Sprintf(" %s:%.0f%%", n.Node, 100*n.Share)
		}
		parts = append(parts, s)
	}
	if h := f.Health; h.Interval > 0 && len(h.Last) > 0 {
		s := "health"
		for _, n := range sortedNodes(h.Last) {
			s += " " + n + ":" + h.Last[n].Result
		}
		parts = append(parts, fmt.Sprintf("%s (outage: %d task probes, %d checks)", s, h.TaskProbes, h.ChecksInOutage))
	}
	return strings.Join(parts, " | ")
}

// writeFleetSummary is the summary's lines on the fleet features.
func writeFleetSummary(b *strings.Builder, f fleetView) {
	switch t := f.Throttle; t.Phase {
	case throttleOn, throttleOver:
		var held, calls []string
		for _, n := range sortedNodes(t.Until) {
			held = append(held, n+" "+fmtT(t.Until[n]))
		}
		for _, n := range sortedNodes(t.Calls) {
			calls = append(calls, fmt.Sprintf("%s %d", n, t.Calls[n]))
		}
		fmt.Fprintf(b, "retry-after:  flaky answered 429 (Retry-After %v) from %s; held until %s (deadlines within %.1fs)\n",
			t.For, fmtT(t.At), orDash(strings.Join(held, ", ")), t.Spread().Seconds())
		fmt.Fprintf(b, "              calls that reached it during the hold: %d (%s; target ≤ 1 per node); its server answered %d × 429\n",
			t.TotalCalls, strings.Join(calls, " · "), t.Received)
	default:
		fmt.Fprintf(b, "retry-after:  no 429 phase (%s)\n", t.Phase)
	}
	if bd := f.Budget; bd.BudgetRPS > 0 {
		var shares []string
		for _, n := range bd.Nodes {
			shares = append(shares, fmt.Sprintf("%s %.0f%%", n.Node, 100*n.Share))
		}
		fmt.Fprintf(b, "fleet budget: healthy %s/s: measured %s; shares %s\n", fmtRPS(bd.BudgetRPS), measuredText(bd), orDash(strings.Join(shares, " · ")))
	}
	if h := f.Health; h.Interval > 0 {
		var last []string
		for _, n := range sortedNodes(h.Last) {
			last = append(last, n+" "+h.Last[n].Result+" ("+h.Last[n].Role+")")
		}
		fmt.Fprintf(b, "health:       flaky checked every %v: during the outage %d tasks spent probing (target 0), %d health checks; last %s\n",
			h.Interval, h.TaskProbes, h.ChecksInOutage, orDash(strings.Join(last, " · ")))
	}
}

func sortedNodes[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
