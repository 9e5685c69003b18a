package breakerpool

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/sony/gobreaker/v2"
)

var keyLabels = []string{"task_group", "namespace", "destination"}

// collector exports every live breaker's series from the breaker's own
// atomic counters at scrape time. The hot path pays one atomic add and no
// label lookup; an evicted breaker's series vanish with it; an idle breaker
// costs no metric children in memory.
type collector struct {
	p           *Pool
	blocked     *prometheus.Desc
	state       *prometheus.Desc
	transitions *prometheus.Desc
	consecutive *prometheus.Desc
	requests    *prometheus.Desc
}

func newCollector(p *Pool) *collector {
	with := func(extra ...string) []string { return append(append([]string{}, keyLabels...), extra...) }
	return &collector{
		p: p,
		blocked: prometheus.NewDesc("fusebox_circuit_breaker_executable_blocked_total",
			"Tasks the CircuitBreakerExecutable rejected because the breaker would not admit them.", with(), nil),
		state: prometheus.NewDesc("fusebox_breaker_state",
			"Effective breaker state: 0 closed, 1 half-open, 2 open.", with(), nil),
		transitions: prometheus.NewDesc("fusebox_breaker_transitions_total",
			"Effective breaker state transitions.", with("from", "to"), nil),
		consecutive: prometheus.NewDesc("fusebox_breaker_consecutive_failures",
			"Consecutive failures counted in the current generation.", with(), nil),
		requests: prometheus.NewDesc("fusebox_breaker_requests_total",
			"Calls by outcome: success, failure (destination down), rejected.", with("outcome"), nil),
	}
}

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.blocked
	ch <- c.state
	ch <- c.transitions
	ch <- c.consecutive
	ch <- c.requests
}

var stateNames = [3]string{
	gobreaker.StateClosed: "closed", gobreaker.StateHalfOpen: "half-open", gobreaker.StateOpen: "open",
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	c.p.entries.Range(func(_ Key, b *Breaker) bool {
		if b.flags.Load()&flagDead != 0 {
			return true
		}
		k := b.key
		tg, ns, d := k.TaskGroup, k.NamespaceID, k.Destination
		gauge := func(desc *prometheus.Desc, v float64, extra ...string) {
			ch <- prometheus.MustNewConstMetric(desc, prometheus.GaugeValue, v, append([]string{tg, ns, d}, extra...)...)
		}
		counter := func(desc *prometheus.Desc, v uint64, extra ...string) {
			ch <- prometheus.MustNewConstMetric(desc, prometheus.CounterValue, float64(v), append([]string{tg, ns, d}, extra...)...)
		}
		gauge(c.state, float64(b.State()))
		gauge(c.consecutive, float64(b.Counts().ConsecutiveFailures))
		counter(c.blocked, b.blocked.Load())
		counter(c.requests, b.success.Load(), "success")
		counter(c.requests, b.failure.Load(), "failure")
		counter(c.requests, b.rejected.Load(), "rejected")
		for from := range b.transitions {
			for to := range b.transitions[from] {
				if n := b.transitions[from][to].Load(); n > 0 {
					counter(c.transitions, n, stateNames[from], stateNames[to])
				}
			}
		}
		return true
	})
}

// registerMetrics creates the pool-level metrics and registers them and the
// per-breaker collector on reg (if not nil).
func (p *Pool) registerMetrics(reg prometheus.Registerer) error {
	p.dropped = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "fusebox_breaker_observer_dropped_total",
		Help: "Breaker transitions dropped because the observer queue was full.",
	})
	p.evicted = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "fusebox_breaker_evictions_total",
		Help: "Idle breakers evicted from the pool.",
	})
	if reg == nil {
		return nil
	}
	entries := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "fusebox_breakers",
		Help: "Breakers currently in the pool.",
	}, func() float64 { return float64(p.Len()) })
	for _, c := range []prometheus.Collector{p.dropped, p.evicted, entries, newCollector(p)} {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}
