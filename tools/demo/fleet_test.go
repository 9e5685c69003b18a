package main

import (
	"strings"
	"testing"
	"time"

	"fusebox/api"
	"fusebox/ui"
)

// TestFleetTrace folds a 429 phase, a fleet budget and health checks the
// way the demo's loop does, and checks each figure of the view.
func TestFleetTrace(t *testing.T) {
	cfg := DefaultConfig()
	cfg.ThrottleAt, cfg.RetryAfter, cfg.FleetRPS, cfg.HealthInterval = 50*time.Second, 8*time.Second, 15, time.Second
	f := newFleet(cfg)
	begin := time.Now().Add(-50 * time.Second)
	if v := f.view(nil, outageView{}, newTrips()); v.Throttle.Phase != throttleScheduled || v.Throttle.Calls != nil {
		t.Fatalf("before: %+v", v.Throttle)
	}

	f.begin(50*time.Second, map[string]flakyCount{"n1": {failures: 10, successes: 100}, "n2": {failures: 4, successes: 90}}, 5)
	deadline := begin.Add(58100 * time.Millisecond)
	later := deadline.Add(150 * time.Millisecond)
	fleetOf := func(share float64) *api.BreakerFleet {
		return &api.BreakerFleet{BudgetRPS: 15, Share: share, RPS: 15 * share,
			Nodes: []api.BreakerFleetNode{{Node: "n1", Backlog: 30, Share: 0.6}, {Node: "n2", Backlog: 20, Share: 0.4}}}
	}
	bs := []breakerView{
		{Node: "n1", Destination: destFlaky, RetryAfterUntil: &deadline,
			Health: &api.BreakerHealth{At: begin.Add(40 * time.Second), Result: "fail", Role: "owner"}},
		{Node: "n2", Destination: destFlaky, RetryAfterUntil: &later},
		{Node: "n1", Destination: destHealthy, Fleet: fleetOf(0.6)},
		{Node: "n2", Destination: destHealthy, Fleet: fleetOf(0.4)},
	}
	f.observe(51*time.Second, begin, map[string]flakyCount{"n1": {failures: 11, successes: 100}}, 7, 1000, bs)
	// n2 does not answer this time: it keeps no figure until it does.
	f.observe(54*time.Second, begin, map[string]flakyCount{"n1": {failures: 11, successes: 100}, "n2": {failures: 4, successes: 90}}, 7, 1045, bs)
	f.finish(58*time.Second, map[string]flakyCount{"n1": {failures: 11, successes: 100}, "n2": {failures: 5, successes: 90}}, 8)
	// After the phase the counters move on; the hold's figures stay.
	f.observe(60*time.Second, begin, map[string]flakyCount{"n1": {failures: 50, successes: 500}}, 8, 1120, bs[2:])

	tr := newTrips()
	tr.update(ui.TransitionList{Transitions: []ui.Transition{
		{Node: "n1", Seq: 3, Destination: destFlaky, From: "half-open", To: "open", Source: "local", At: begin.Add(25 * time.Second)},
		{Node: "n2", Seq: 2, Destination: destFlaky, From: "half-open", To: "open", Source: "local", At: begin.Add(15 * time.Second)},
		{Node: "n2", Seq: 1, Destination: destFlaky, From: "half-open", To: "open", Source: "local", At: begin.Add(5 * time.Second)},
	}}, begin)
	o := outageView{Phase: phaseOver, Started: 10 * time.Second, Elapsed: 30 * time.Second, HealthChecks: 28}
	v := f.view(bs[2:], o, tr)

	th := v.Throttle
	if th.Phase != throttleOver || th.Received != 3 {
		t.Errorf("phase %q, 429s %d; want over, 3", th.Phase, th.Received)
	}
	if th.Until["n1"] != 58100*time.Millisecond || th.Until["n2"] != 58250*time.Millisecond || th.Spread() != 150*time.Millisecond {
		t.Errorf("deadlines %v (spread %v); want n1 t+58.1s, n2 t+58.25s", th.Until, th.Spread())
	}
	if th.Calls["n1"] != 1 || th.Calls["n2"] != 1 || th.TotalCalls != 2 {
		t.Errorf("calls in the hold %v (total %d); want n1 1, n2 1", th.Calls, th.TotalCalls)
	}

	bd := v.Budget
	if bd.BudgetRPS != 15 || len(bd.Nodes) != 2 || bd.Nodes[0] != (budgetNode{Node: "n1", Share: 0.6, RPS: 9, Backlog: 30}) || bd.Nodes[1].Backlog != 20 {
		t.Errorf("budget %+v", bd)
	}
	// The window keeps the samples of the last rateWindow: 1045 at 54 s
	// and 1120 at 60 s (the 51 s one aged out).
	if bd.Window != 6*time.Second || bd.MeasuredRPS != 12.5 {
		t.Errorf("measured %v/s over %v; want 12.5/s over 6s", bd.MeasuredRPS, bd.Window)
	}

	h := v.Health
	if h.Interval != time.Second || h.ChecksInOutage != 28 || h.TaskProbes != 2 {
		t.Errorf("health %+v; want 28 checks and the 2 failed probes within [10s, 40s]", h)
	}
	if l := h.Last["n1"]; l.Result != "fail" || l.Role != "owner" || l.At != 40*time.Second {
		t.Errorf("n1's last health check %+v", l)
	}

	var b strings.Builder
	writeFleetSummary(&b, v)
	for _, want := range []string{"held until n1 t+58.1s, n2 t+58.2s (deadlines within 0.1s)", "during the hold: 2 (n1 1 · n2 1; target ≤ 1 per node)",
		"answered 3 × 429", "healthy 15/s: measured 12.5/s over the last 6s; shares n1 60% · n2 40%", "2 tasks spent probing (target 0), 28 health checks; last n1 fail (owner)"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("summary lacks %q:\n%s", want, b.String())
		}
	}

	off := DefaultConfig()
	off.RetryAfter, off.FleetRPS, off.HealthInterval = 0, 0, 0
	v = newFleet(off).view(nil, outageView{}, newTrips())
	var frame strings.Builder
	writeFleet(&frame, v, []string{"n1"}, time.Second)
	for _, want := range []string{"no 429 phase (--retry-after 0)", "fleet budget: none", "health checks: none"} {
		if !strings.Contains(frame.String(), want) {
			t.Errorf("features off: frame lacks %q:\n%s", want, frame.String())
		}
	}
}
