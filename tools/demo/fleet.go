package main

import (
	"sort"
	"time"
)

// The fleet features' trace (issue 19): flaky's 429 phase and the
// Retry-After hold every node should share (§1), healthy's fleet rate
// budget (§3), flaky's active health checks (§4). Each figure is read from
// the nodes (GET /v1/breakers, /metrics) or the destinations' own records.

// Phases of the 429 phase (the outage's names).
const (
	throttleNone      = phaseNone
	throttleScheduled = phaseScheduled
	throttleOn        = "on"
	throttleOver      = phaseOver
)

// rateWindow is how far back healthy's measured rate looks.
const rateWindow = 5 * time.Second

// fleet follows the three features. Used from the demo's main loop only.
type fleet struct {
	cfg Config

	// The 429 phase.
	phase              string
	startedAt, endedAt time.Duration
	base, last         map[string]flakyCount
	recvBase, recvLast int                      // requests flaky answered 429
	until              map[string]time.Duration // node → latest retry_after_until seen, since the start

	// healthy's received requests, newest last, over about rateWindow.
	samples []rateSample

	// The last health check of flaky per node, kept after the breaker
	// stops reporting it.
	health map[string]healthSeen
}

type rateSample struct {
	at       time.Duration
	received int
}

// healthSeen is one node's last health check of flaky.
type healthSeen struct {
	At     time.Duration // since the workload start
	Result string        // pass, fail, error, refused
	Role   string        // owner, fallback, settle
}

func newFleet(cfg Config) *fleet {
	f := &fleet{cfg: cfg, phase: throttleScheduled, until: map[string]time.Duration{}, health: map[string]healthSeen{}}
	if cfg.RetryAfter == 0 {
		f.phase = throttleNone
	}
	return f
}

// begin records the counters as flaky starts answering 429.
func (f *fleet) begin(at time.Duration, counts map[string]flakyCount, received int) {
	f.phase, f.startedAt = throttleOn, at
	f.base, f.recvBase = counts, received
	f.fold(at, counts, received)
}

// finish records the counters as flaky answers normally again.
func (f *fleet) finish(at time.Duration, counts map[string]flakyCount, received int) {
	f.fold(at, counts, received)
	f.phase = throttleOver
}

// fold keeps the latest counters while the phase is on; a node missing from
// counts keeps its last figures.
func (f *fleet) fold(at time.Duration, counts map[string]flakyCount, received int) {
	if f.phase != throttleOn {
		return
	}
	if f.last == nil {
		f.last = map[string]flakyCount{}
	}
	for n, c := range counts {
		f.last[n] = c
	}
	f.endedAt, f.recvLast = at, received
}

// observe folds one refresh in: the counters (during the 429 phase), the
// breakers' Retry-After deadlines and health checks, healthy's requests.
// begin is the wall clock of the workload start.
func (f *fleet) observe(at time.Duration, begin time.Time, counts map[string]flakyCount, received429, healthyReceived int, bs []breakerView) {
	f.fold(at, counts, received429)
	for _, b := range bs {
		if b.Destination != destFlaky {
			continue
		}
		if b.RetryAfterUntil != nil && f.phase != throttleNone && f.phase != throttleScheduled {
			f.until[b.Node] = b.RetryAfterUntil.Sub(begin)
		}
		if h := b.Health; h != nil {
			f.health[b.Node] = healthSeen{At: h.At.Sub(begin), Result: h.Result, Role: h.Role}
		}
	}
	f.samples = append(f.samples, rateSample{at, healthyReceived})
	for len(f.samples) > 2 && at-f.samples[1].at >= rateWindow {
		f.samples = f.samples[1:]
	}
}

// fleetView is what the view and the summary show of the three features.
type fleetView struct {
	Throttle throttleView
	Budget   budgetView
	Health   healthView
}

// throttleView is the 429 phase: each node's hold and its calls meanwhile.
type throttleView struct {
	Phase      string
	At, For    time.Duration            // as configured (For is also the Retry-After)
	Until      map[string]time.Duration // node → the hold's deadline it reported
	Calls      map[string]int           // node → calls that reached flaky during the phase
	TotalCalls int
	Received   int // 429 answers flaky's server gave
}

// Spread is the gap between the earliest and latest deadline reported.
func (t throttleView) Spread() time.Duration {
	var lo, hi time.Duration
	first := true
	for _, u := range t.Until {
		if first || u < lo {
			lo = u
		}
		if first || u > hi {
			hi = u
		}
		first = false
	}
	return hi - lo
}

// budgetView is healthy's fleet rate budget: each node's share as it
// computes it, and the rate healthy's server measured.
type budgetView struct {
	BudgetRPS float64 // configured; 0 is off
	Nodes     []budgetNode
	// MeasuredRPS is the requests healthy's server handled per second over
	// the last Window (0 until two refreshes).
	MeasuredRPS float64
	Window      time.Duration
}

type budgetNode struct {
	Node    string
	Share   float64 // of the budget, [0, 1]
	RPS     float64 // the node's rate from it
	Backlog int64   // the node's own backlog for healthy, as it reports it
}

// healthView is flaky's health checks: each node's last result and, for
// the outage, the tasks spent probing against the checks made.
type healthView struct {
	Interval time.Duration // 0: no health check registered
	Last     map[string]healthSeen
	// ChecksInOutage counts the health checks all nodes made while flaky
	// was down (fusebox_health_checks_total); TaskProbes the failed
	// half-open probes meanwhile (the nodes' timelines), each a real task.
	ChecksInOutage int
	TaskProbes     int
}

// view returns the features' trace; o is the outage as viewed now and tr
// the trips (for the failed probes during it).
func (f *fleet) view(bs []breakerView, o outageView, tr *trips) fleetView {
	v := fleetView{
		Throttle: throttleView{Phase: f.phase, At: f.cfg.ThrottleAt, For: f.cfg.RetryAfter},
		Budget:   budgetView{BudgetRPS: f.cfg.FleetRPS},
		Health:   healthView{Interval: f.cfg.HealthInterval, Last: map[string]healthSeen{}},
	}
	if f.phase == throttleOn || f.phase == throttleOver {
		v.Throttle.Until, v.Throttle.Calls = map[string]time.Duration{}, map[string]int{}
		for n, u := range f.until {
			v.Throttle.Until[n] = u
		}
		for n, c := range f.last {
			b := f.base[n]
			calls := int(c.failures + c.successes - b.failures - b.successes)
			v.Throttle.Calls[n] = calls
			v.Throttle.TotalCalls += calls
		}
		v.Throttle.Received = f.recvLast - f.recvBase
	}
	for _, b := range bs {
		if b.Destination == destHealthy && b.Fleet != nil {
			bn := budgetNode{Node: b.Node, Share: b.Fleet.Share, RPS: b.Fleet.RPS}
			for _, fn := range b.Fleet.Nodes {
				if fn.Node == b.Node {
					bn.Backlog = fn.Backlog
				}
			}
			v.Budget.Nodes = append(v.Budget.Nodes, bn)
		}
	}
	sort.Slice(v.Budget.Nodes, func(i, j int) bool { return v.Budget.Nodes[i].Node < v.Budget.Nodes[j].Node })
	if n := len(f.samples); n >= 2 {
		a, z := f.samples[0], f.samples[n-1]
		if dt := z.at - a.at; dt > 0 {
			v.Budget.MeasuredRPS, v.Budget.Window = float64(z.received-a.received)/dt.Seconds(), dt
		}
	}
	for n, h := range f.health {
		v.Health.Last[n] = h
	}
	if o.Phase == phaseDown || o.Phase == phaseOver {
		v.Health.ChecksInOutage = o.HealthChecks
		v.Health.TaskProbes = tr.probesBetween(o.Started, o.Started+o.Elapsed)
	}
	return v
}
