package node

import (
	"math"

	"golang.org/x/time/rate"

	"fusebox/breakerpool"
	"fusebox/cluster"
	"fusebox/queue"
	"fusebox/transport"
)

// aliveShare is queue.FleetShare as an equal split over the live members:
// a recovery ramp's fleet-wide start rate (issue 19 §2) divided so that
// the fleet together starts at rampStartRPS.
type aliveShare struct{ m *cluster.Membership }

func (a aliveShare) Share(breakerpool.Key) float64 {
	return 1 / float64(max(1, a.m.NumAlive()))
}

// apiRamps is transport.Ramps over the queue's recovery ramps.
type apiRamps struct{ q *queue.Queue }

func (a apiRamps) Ramp(k breakerpool.Key) (transport.BreakerRamp, bool) {
	st, ok := a.q.Ramp(k)
	if !ok {
		return transport.BreakerRamp{}, false
	}
	target := st.TargetRPS
	if target >= float64(rate.Inf) || math.IsInf(target, 1) {
		target = 0 // unlimited: JSON has no infinity
	}
	return transport.BreakerRamp{Since: st.Since, Until: st.Until, StartRPS: st.StartRPS, RPS: st.RPS, TargetRPS: target}, true
}
