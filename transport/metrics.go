package transport

import (
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"fusebox/breakerpool"
)

// metrics are the executor's series; nil when no Registerer was given.
type metrics struct {
	attempts *prometheus.CounterVec
	duration *prometheus.HistogramVec

	// The series' handles, resolved on first use: WithLabelValues hashes
	// the labels and looks them up under the vector's lock at every call,
	// 0.6 % of a durably delivered task's CPU for these two. The label
	// sets are fixed (metricGroups × outcomes), and these series are never
	// deleted, so a handle stays valid.
	attemptsBy [len(metricGroups)][OutcomeAborted + 1]atomic.Pointer[prometheus.Counter]
	durationBy [len(metricGroups)]atomic.Pointer[prometheus.Observer]
}

// metricGroups are the task_group label's values; the last stands for any
// other (Validate refuses those).
var metricGroups = [...]string{breakerpool.TaskGroupNexusInvocation, breakerpool.TaskGroupNexusCancelation, breakerpool.TaskGroupCallback, "invalid"}

// metricGroup is taskGroup's index in metricGroups.
func metricGroup(taskGroup string) int {
	for i, g := range metricGroups[:len(metricGroups)-1] {
		if g == taskGroup {
			return i
		}
	}
	return len(metricGroups) - 1
}

// handle returns *p, resolving it with get the first time. Two callers may
// both resolve it; they get the same series.
func handle[M any](p *atomic.Pointer[M], get func() M) M {
	if h := p.Load(); h != nil {
		return *h
	}
	h := get()
	p.Store(&h)
	return h
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
	g := metricGroup(taskGroup)
	if o >= 0 && int(o) < len(m.attemptsBy[g]) {
		handle(&m.attemptsBy[g][o], func() prometheus.Counter { return m.attempts.WithLabelValues(metricGroups[g], o.String()) }).Inc()
	} else {
		m.attempts.WithLabelValues(metricGroups[g], o.String()).Inc()
	}
	handle(&m.durationBy[g], func() prometheus.Observer { return m.duration.WithLabelValues(metricGroups[g]) }).Observe(d.Seconds())
}
