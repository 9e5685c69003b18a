package node

import (
	"math"

	"golang.org/x/time/rate"

	"fusebox/api"
	"fusebox/breakerpool"
	"fusebox/cluster"
	"fusebox/queue"
)

// fleetShare is queue.FleetShare: this node's part of a key's fleet-wide
// rates — the fleet rate budget (issue 19 §3) and a recovery ramp's start
// rate (§2). For a key the nodes report backlogs for (it has a fleet
// budget) it is the backlog-weighted share the gossip gives
// (cluster/fleet.go); otherwise an equal split over the live members.
type fleetShare struct{ m *cluster.Membership }

func (f fleetShare) Share(k breakerpool.Key) float64 {
	if s, ok := f.m.FleetShare(k); ok {
		return s
	}
	return 1 / float64(max(1, f.m.NumAlive()))
}

// BudgetShare is queue.FleetBudgetShare: Share, but 0 instead of the equal
// split while this node is not yet FleetWarm (just started or restarted,
// it does not know how many nodes share the budget).
func (f fleetShare) BudgetShare(k breakerpool.Key) float64 {
	if s, ok := f.m.FleetShare(k); ok {
		return s
	}
	if !f.m.FleetWarm() {
		return 0
	}
	return 1 / float64(max(1, f.m.NumAlive()))
}

// queueBacklogs is cluster.IdleBacklogSource over the queue: the backlog
// of every key with a fleet budget, gossiped every FleetInterval, and
// whether the queue has no group at all (then nothing is sampled between
// reports).
type queueBacklogs struct{ q *queue.Queue }

func (b queueBacklogs) FleetBacklogs() []cluster.FleetEntry {
	bl := b.q.FleetBacklogs()
	out := make([]cluster.FleetEntry, len(bl))
	for i, e := range bl {
		out[i] = cluster.FleetEntry{Key: e.Key, Backlog: e.Backlog}
	}
	return out
}

var _ cluster.IdleBacklogSource = queueBacklogs{}

func (b queueBacklogs) FleetIdle() bool            { return b.q.FleetIdle() }
func (b queueBacklogs) FleetWake() <-chan struct{} { return b.q.FleetWake() }

// apiRamps is api.Ramps over the queue's recovery ramps.
type apiRamps struct{ q *queue.Queue }

func (a apiRamps) Ramp(k breakerpool.Key) (api.BreakerRamp, bool) {
	st, ok := a.q.Ramp(k)
	if !ok {
		return api.BreakerRamp{}, false
	}
	target := st.TargetRPS
	if target >= float64(rate.Inf) || math.IsInf(target, 1) {
		target = 0 // unlimited: JSON has no infinity
	}
	return api.BreakerRamp{Since: st.Since, Until: st.Until, StartRPS: st.StartRPS, RPS: st.RPS, TargetRPS: target}, true
}

// apiFleet is api.Fleets: a budgeted key's share on this node and
// every node's share as this node sees it.
type apiFleet struct {
	q *queue.Queue
	m *cluster.Membership
}

func (a apiFleet) Fleet(k breakerpool.Key) (api.BreakerFleet, bool) {
	st, ok := a.q.Fleet(k)
	if !ok {
		return api.BreakerFleet{}, false
	}
	rps := st.RPS
	if math.IsInf(rps, 1) {
		rps = 0
	}
	f := api.BreakerFleet{BudgetRPS: st.BudgetRPS, Share: st.Share, RPS: rps}
	for _, s := range a.m.FleetShares(k) {
		f.Nodes = append(f.Nodes, api.BreakerFleetNode{Node: s.Node, Backlog: s.Backlog, Share: s.Share, Silent: s.Silent})
	}
	return f, true
}
