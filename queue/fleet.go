package queue

import (
	"math"

	"golang.org/x/time/rate"

	"fusebox/breakerpool"
)

// Fleet rate budget (issue 19 §3, RECOVERY.md "Fleet rate budget"). A key
// whose limits give it a fleet-wide budget (FleetLimits.FleetRPS > 0) runs
// at this node's share of it (Deps.Fleet: backlog-weighted in node/, from
// the peers' gossiped backlogs), never above its per-host rate. retune
// re-applies the share every rampTick, so a changed share (a node joined or
// left the key's set) reaches the limiter within 100 ms of being known.

// FleetLimits is the budget's dynamic setting (dynconfig's Snapshot has
// it). Limits without it have no budget.
type FleetLimits interface {
	// FleetRPS is the destination's fleet-wide rate; 0 means none.
	FleetRPS(namespaceID, destination string) float64
}

// fleetBurstSeconds is the burst a budgeted key's limiter gets, in seconds
// of its rate: a token bucket admits rate × 1 s + burst in any one-second
// window, so 20 ms keeps the tokens saved while idle within 2 % of the
// share.
const fleetBurstSeconds = 0.02

// fleetBudget is k's fleet-wide budget, 0 when it has none.
func fleetBudget(l Limits, k breakerpool.Key) float64 {
	fl, ok := l.(FleetLimits)
	if !ok {
		return 0
	}
	b := fl.FleetRPS(k.NamespaceID, k.Destination)
	if !(b > 0) || math.IsInf(b, 1) {
		return 0
	}
	return b
}

// fleetRate is the rate k's limiter has before any ramp: the configured
// per-host rate rps, lowered to this node's share of k's fleet budget when
// it has one (a share of 0 admits nothing until it changes).
func (q *Queue) fleetRate(l Limits, k breakerpool.Key, rps rate.Limit, burst int) (rate.Limit, int) {
	budget := fleetBudget(l, k)
	if budget == 0 || rps == 0 {
		return rps, burst
	}
	r := budget * q.budgetShare(k)
	if rps != rate.Inf && float64(rps) < r {
		r = float64(rps)
	}
	if !(r > 0) {
		return 0, 1
	}
	return rate.Limit(r), int(max(1, min(math.Ceil(r*fleetBurstSeconds), 1<<30)))
}

// fleetManaged reports whether k's rate follows a fleet share over time
// (retune then re-applies it every rampTick): k has a fleet budget.
func (q *Queue) fleetManaged(l Limits, k breakerpool.Key) bool { return fleetBudget(l, k) > 0 }

// FleetBacklog is one key's backlog on this node.
type FleetBacklog struct {
	Key     breakerpool.Key
	Backlog int64
}

// FleetBacklogs returns, for every key with a fleet budget and tasks here,
// its backlog: the tasks queued at its group (up to its BufferSize) plus
// the calls under way. That is the weight the budget is shared by. Cheap
// enough to call every 50 ms: it visits the budgeted groups only (the set
// create, refresh and gc keep), with no limits lookup.
func (q *Queue) FleetBacklogs() []FleetBacklog {
	s := q.sched
	s.fmu.Lock()
	defer s.fmu.Unlock()
	var out []FleetBacklog
	for k, g := range s.budgeted {
		g.mu.Lock()
		n := int64(len(g.buf) - g.head + g.workers)
		g.mu.Unlock()
		if n > 0 {
			out = append(out, FleetBacklog{Key: k, Backlog: n})
		}
	}
	return out
}

// FleetIdle reports whether no key can have a backlog here until
// FleetWake's channel is signalled: the queue has no group with a fleet
// budget (a group is created, and its budget known, before its first task
// is queued; a config change that gives one a budget signals too).
func (q *Queue) FleetIdle() bool {
	s := q.sched
	s.fmu.Lock()
	defer s.fmu.Unlock()
	return len(s.budgeted) == 0
}

// FleetWake is signalled when a first budgeted group appears (one
// receiver).
func (q *Queue) FleetWake() <-chan struct{} { return q.sched.fleetWake }

// FleetStatus is a budgeted key's rate on this node.
type FleetStatus struct {
	BudgetRPS float64 // the fleet-wide budget
	Share     float64 // this node's share of it, in [0, 1]
	RPS       float64 // this node's rate from it (capped by the per-host rate)
}

// Fleet returns k's budget status on this node; ok is false when k has no
// fleet budget.
func (q *Queue) Fleet(k breakerpool.Key) (st FleetStatus, ok bool) {
	l := q.limits.Current()
	budget := fleetBudget(l, k)
	if budget == 0 {
		return st, false
	}
	_, _, rps, _ := limitsFor(l, k)
	r, _ := q.fleetRate(l, k, rps, 1)
	return FleetStatus{BudgetRPS: budget, Share: q.budgetShare(k), RPS: float64(r)}, true
}
