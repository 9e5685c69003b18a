package queue

import (
	"golang.org/x/time/rate"

	"fusebox/breakerpool"
)

// fleetRate is the rate k's limiter has before any ramp: the configured
// per-host rate. It is the hook for a fleet-wide rate budget per
// destination (issue 19 §3, not built yet): this node's backlog-weighted
// share of the budget would lower rps here, and ramps start from it.
func (q *Queue) fleetRate(_ Limits, _ breakerpool.Key, rps rate.Limit, burst int) (rate.Limit, int) {
	return rps, burst
}

// fleetManaged reports whether k's rate follows a fleet share over time
// (retune then re-applies it every rampTick); none does yet.
func (q *Queue) fleetManaged(_ Limits, _ breakerpool.Key) bool { return false }
