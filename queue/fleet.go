package queue

import (
	"golang.org/x/time/rate"

	"fusebox/breakerpool"
)

// fleetRate is the rate k's limiter has before any ramp: the configured
// per-host rate.
func (q *Queue) fleetRate(_ Limits, _ breakerpool.Key, rps rate.Limit, burst int) (rate.Limit, int) {
	return rps, burst
}

// fleetManaged reports whether k's rate follows a fleet share over time.
func (q *Queue) fleetManaged(_ Limits, _ breakerpool.Key) bool { return false }
