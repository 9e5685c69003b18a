package node

import (
	"fusebox/breakerpool"
	"fusebox/cluster"
)

// aliveShare is queue.FleetShare as an equal split over the live members:
// a recovery ramp's fleet-wide start rate (issue 19 §2) divided so that
// the fleet together starts at rampStartRPS.
type aliveShare struct{ m *cluster.Membership }

func (a aliveShare) Share(breakerpool.Key) float64 {
	return 1 / float64(max(1, a.m.NumAlive()))
}
