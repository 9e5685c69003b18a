package main

import (
	"fmt"
	"time"

	"fusebox/breakerpool"
)

// Phases of the flaky destination's outage.
const (
	phaseNone      = "none" // no outage configured
	phaseScheduled = "scheduled"
	phaseDown      = "down"
	phaseOver      = "over"
)

// flakyCount is one node's flaky-breaker request counters: calls that
// failed as destination-down, and calls the breaker refused. (Successes are
// left out: they are calls to a destination that was up, such as the ones
// between the baseline scrape and the switch.)
// successes and health (health checks made, fleet.go) serve the 429 phase
// and the health-check trace.
type flakyCount struct{ failures, rejected, successes, health float64 }

// outage accounts for the calls the flaky destination cost while it was
// down: the breaker request counters of every node at the start, and now
// (or at the end). Used from the demo's main loop only.
type outage struct {
	at, dur time.Duration
	mode    string
	phase   string

	startedAt, endedAt time.Duration
	base, last         map[string]flakyCount
	recvBase, recvLast int // requests the flaky server handled in its outage mode
	subBase, subLast   int // flaky tasks the workload submitted
	settings           breakerpool.Settings
}

func newOutage(cfg Config) *outage {
	o := &outage{at: cfg.OutageAt, dur: cfg.OutageFor, mode: cfg.OutageMode, phase: phaseScheduled}
	if cfg.OutageFor == 0 {
		o.phase = phaseNone
	}
	// Until a breaker reports its settings: the defaults plus the demo's
	// Timeout.
	o.settings = breakerpool.DefaultSettings()
	o.settings.Timeout = breakerpool.Duration(cfg.BreakerTimeout)
	return o
}

// begin records the counters as the destination goes down.
func (o *outage) begin(at time.Duration, counts map[string]flakyCount, received, submitted int) {
	o.phase, o.startedAt = phaseDown, at
	o.base, o.recvBase, o.subBase = counts, received, submitted
	o.update(at, counts, received, submitted)
}

// update records the latest counters while down; a node missing from
// counts (no answer this time) keeps its last figures.
func (o *outage) update(at time.Duration, counts map[string]flakyCount, received, submitted int) {
	if o.phase != phaseDown {
		return
	}
	if o.last == nil {
		o.last = map[string]flakyCount{}
	}
	for n, c := range counts {
		o.last[n] = c
	}
	o.endedAt, o.recvLast, o.subLast = at, received, submitted
}

// finish records the counters as the destination comes back.
func (o *outage) finish(at time.Duration, counts map[string]flakyCount, received, submitted int) {
	o.update(at, counts, received, submitted)
	o.phase = phaseOver
}

// observeSettings keeps the flaky breaker's effective settings, which the
// estimate uses.
func (o *outage) observeSettings(bs []breakerView) {
	for _, b := range bs {
		if b.Destination == destFlaky && b.hasSettings {
			o.settings = b.settings
			return
		}
	}
}

// outageView is what the view and the summary show of the outage.
type outageView struct {
	Phase          string
	Mode           string
	At, For        time.Duration  // as configured
	Elapsed        time.Duration  // down so far (or in all, once over)
	Calls          int            // calls to flaky that failed while it was down, all nodes
	PerNode        map[string]int // Calls by node
	Rejected       int            // flaky tasks the breakers refused meanwhile
	Received       int            // requests flaky's server handled in its outage mode (503s; ~0 when refusing)
	TasksSubmitted int            // flaky tasks submitted meanwhile
	NodesCalling   int            // nodes with flaky tasks meanwhile
	Estimate       int            // per-host breakers, gossip off: see perHostEstimate
	Formula        string         // how Estimate was computed, with the figures
	Started        time.Duration  // when it went down (since the workload start)
	HealthChecks   int            // health checks the nodes made meanwhile (fleet.go)
}

func (o *outage) view() outageView {
	v := outageView{Phase: o.phase, Mode: o.mode, At: o.at, For: o.dur}
	if o.phase != phaseDown && o.phase != phaseOver {
		return v
	}
	v.Elapsed, v.Started = o.endedAt-o.startedAt, o.startedAt
	v.PerNode = map[string]int{}
	for n, c := range o.last {
		b := o.base[n] // a node without a baseline counts from zero
		v.PerNode[n] = int(c.failures - b.failures)
		v.Calls += int(c.failures - b.failures)
		v.Rejected += int(c.rejected - b.rejected)
		v.HealthChecks += int(c.health - b.health)
		if c.failures+c.rejected > b.failures+b.rejected {
			v.NodesCalling++
		}
	}
	v.Received = o.recvLast - o.recvBase
	v.TasksSubmitted = o.subLast - o.subBase
	v.Estimate, v.Formula = perHostEstimate(v.NodesCalling, v.Elapsed, o.settings)
	return v
}

// perHostEstimate is what per-host breakers (gossip off, Temporal's
// design) would have let through to a destination that was down for
// elapsed, with tasks arriving on `nodes` nodes all along: each node trips
// on its own after FailureThreshold consecutive failures, then probes with
// MaxRequests calls every Timeout, each probe failing and reopening it. It
// ignores calls already in flight when the first failure returns (a
// lower-bound flavour) and the pool's Timeout jitter of ×[1, 1.2) (an
// upper-bound flavour); it is an estimate, labelled so everywhere.
func perHostEstimate(nodes int, elapsed time.Duration, s breakerpool.Settings) (int, string) {
	s = s.Normalized()
	probes := int(elapsed / s.Timeout.D())
	est := nodes * (int(s.FailureThreshold) + int(s.MaxRequests)*probes)
	return est, fmt.Sprintf("%d nodes × (%d failures to trip + %d probe × %d timeouts of %v)",
		nodes, s.FailureThreshold, s.MaxRequests, probes, s.Timeout.D())
}
