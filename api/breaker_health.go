package api

import (
	"time"

	"fusebox/breakerpool"
)

// BreakerHealth is the last active health check this node made for a
// breaker key (healthprobe): while the key is open, its probe owner calls
// the destination's health URL instead of spending a task.
type BreakerHealth struct {
	At time.Time `json:"at"`
	// Result is pass, fail, error or refused (by the outbound allowlist).
	Result string `json:"result"`
	// Role is owner (every interval), fallback (a non-owner, rarely) or
	// settle (a half-open breaker no task resolved).
	Role            string  `json:"role"`
	Status          int     `json:"status,omitempty"`
	Error           string  `json:"error,omitempty"`
	DurationSeconds float64 `json:"duration_seconds"`
}

// HealthChecks is the health prober as the breaker list uses it (node
// adapts *healthprobe.Prober); nil leaves the health field out.
type HealthChecks interface {
	HealthOf(k breakerpool.Key) (BreakerHealth, bool)
}

// withHealth adds each breaker's last health check, if any.
func (s *Server) withHealth(out []Breaker, statuses []breakerpool.Status) {
	if s.deps.Health == nil {
		return
	}
	for i, st := range statuses {
		if h, ok := s.deps.Health.HealthOf(st.Key); ok {
			out[i].Health = &h
		}
	}
}
