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
	aggregated  *prometheus.Desc
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
		aggregated: prometheus.NewDesc("fusebox_breaker_series_aggregated",
			`Breakers summed under destination="_other" at this scrape instead of having series of their own.`, nil, nil),
	}
}

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.blocked
	ch <- c.state
	ch <- c.transitions
	ch <- c.consecutive
	ch <- c.requests
	ch <- c.aggregated
}

var stateNames = [3]string{
	gobreaker.StateClosed: "closed", gobreaker.StateHalfOpen: "half-open", gobreaker.StateOpen: "open",
}

// Collect exports the series of the breakers selectSeries shows, then one
// set per (task group, namespace) summing the others under destination
// SeriesOther: counters as the sum of what each counted while summed (see
// otherEntry), consecutive failures as the worst. No state series is
// written for SeriesOther: only closed breakers can be in it, and
// count(fusebox_breaker_state) keeps counting destinations.
func (c *collector) Collect(ch chan<- prometheus.Metric) {
	sel := c.p.series.selectSeries(c.p)
	for _, b := range sel.shown {
		k := b.key
		c.export(ch, k.TaskGroup, k.NamespaceID, k.Destination, snapOf(b), b.Counts().ConsecutiveFailures, float64(b.State()), true)
	}
	for ok, members := range sel.others {
		var worst uint32
		for _, b := range members {
			worst = max(worst, b.Counts().ConsecutiveFailures)
		}
		c.export(ch, ok.taskGroup, ok.namespace, SeriesOther, *sel.sums[ok], worst, 0, false)
		delete(sel.sums, ok)
	}
	for ok, sum := range sel.sums { // groups whose members all left: the retired sums
		c.export(ch, ok.taskGroup, ok.namespace, SeriesOther, *sum, 0, 0, false)
	}
	ch <- prometheus.MustNewConstMetric(c.aggregated, prometheus.GaugeValue, float64(c.p.series.aggregated.Load()))
}

func (c *collector) export(ch chan<- prometheus.Metric, tg, ns, d string, s counterSnap, consecutive uint32, state float64, withState bool) {
	gauge := func(desc *prometheus.Desc, v float64, extra ...string) {
		ch <- prometheus.MustNewConstMetric(desc, prometheus.GaugeValue, v, append([]string{tg, ns, d}, extra...)...)
	}
	counter := func(desc *prometheus.Desc, v uint64, extra ...string) {
		ch <- prometheus.MustNewConstMetric(desc, prometheus.CounterValue, float64(v), append([]string{tg, ns, d}, extra...)...)
	}
	if withState {
		gauge(c.state, state)
	}
	gauge(c.consecutive, float64(consecutive))
	counter(c.blocked, s[snapBlocked])
	counter(c.requests, s[snapSuccess], "success")
	counter(c.requests, s[snapFailure], "failure")
	counter(c.requests, s[snapRejected], "rejected")
	for from := range 3 {
		for to := range 3 {
			if n := s[snapTransitions+3*from+to]; n > 0 {
				counter(c.transitions, n, stateNames[from], stateNames[to])
			}
		}
	}
}

// registerMetrics creates the pool-level metrics and registers them and the
// per-breaker collector on reg (if not nil).
func (p *Pool) registerMetrics(reg prometheus.Registerer) error {
	p.dropped = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "fusebox_breaker_observer_dropped_total",
		Help: "Breaker transitions and early warnings never delivered to the observer: while its queue was full, a later event of the same breaker replaced them (each breaker's latest is always delivered).",
	})
	p.evicted = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "fusebox_breaker_evictions_total",
		Help: "Idle breakers evicted from the pool.",
	})
	p.series = newSeriesState(p.cfg.SeriesLimit)
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
