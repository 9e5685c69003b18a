package transport

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"fusebox/breakerpool"
)

// metrics are the executor's series; nil when no Registerer was given.
type metrics struct {
	attempts *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	if reg == nil {
		return nil, nil
	}
	m := &metrics{
		attempts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fusebox_outbound_attempts_total",
			Help: "Outbound attempts by task group and outcome (succeeded, started, failed, down, aborted).",
		}, []string{"task_group", "outcome"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "fusebox_outbound_attempt_duration_seconds",
			Help:    "Duration of outbound attempts by task group.",
			Buckets: []float64{.001, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}, []string{"task_group"}),
	}
	for _, c := range []prometheus.Collector{m.attempts, m.duration} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func (m *metrics) observe(taskGroup string, o Outcome, d time.Duration) {
	if m == nil {
		return
	}
	// Unknown task groups are rejected by Validate; keep label values bounded.
	switch taskGroup {
	case breakerpool.TaskGroupNexusInvocation, breakerpool.TaskGroupNexusCancelation, breakerpool.TaskGroupCallback:
	default:
		taskGroup = "invalid"
	}
	m.attempts.WithLabelValues(taskGroup, o.String()).Inc()
	m.duration.WithLabelValues(taskGroup).Observe(d.Seconds())
}
