package hintpolicy

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// Probe roles, the role label of fusebox_breaker_probes_total.
const (
	ProbeOwner    = "owner"    // this node owns the key's probe and its open period ended
	ProbeFallback = "fallback" // not the owner, but its fallback deadline passed
	ProbeWarm     = "warm"     // a peer's closed hint warm-started the probe
	ProbeGuard    = "guard"    // an open or failing hint made a closed breaker admit only probes
	ProbeLocal    = "local"    // policy off: the breaker's own timer, no coordination
	ProbeConfirm  = "confirm"  // confirm: this node was designated to check a peer's failure report
)

// Hint actions, the action label of fusebox_hint_actions_total: what the
// policy did with a peer's hint.
const (
	ActionGuard          = "guard"           // probe: closed breaker guarded
	ActionGuardFailing   = "guard_failing"   // probe/adopt: a failing hint guarded a closed breaker
	ActionAdopt          = "adopt"           // adopt: breaker opened for the hint's time
	ActionExtend         = "extend"          // the probe owner's open hint extended a held breaker
	ActionWarm           = "warm"            // closed hint: open breaker probes now
	ActionRecorded       = "recorded"        // policy off, or nothing to change
	ActionStale          = "stale"           // older than the key's Lamport clock
	ActionDuplicate      = "duplicate"       // same generation and origin as the newest seen
	ActionIgnoredSuspect = "ignored_suspect" // open hint from a node that suspects itself
	ActionPrecreate      = "precreate"       // open hint created the breaker of an unused key
	ActionSkipUnknown    = "skipped_unknown" // open hint for an unused key past the precreate bound
	ActionRetryAfter     = "retry_after"     // open hint with a Retry-After deadline: breaker held open until it, any policy
	ActionConfirmPause   = "confirm_pause"   // confirm: a peer's report paused the key while a designated peer probes
	ActionConfirmProbe   = "confirm_probe"   // confirm: this node was designated and probes
	ActionConfirmRetry   = "confirm_retry"   // confirm: the designated peer did not answer in time; the next one was asked
	ActionConfirmGaveUp  = "confirm_gave_up" // confirm: nobody answered; every node probes by itself
	ActionConfirmed      = "confirmed"       // confirm: an independent probe or report failed too; open adopted
	ActionRefuted        = "refuted"         // confirm: the independent probe passed; the reporter is distrusted for the key
	ActionDistrusted     = "distrusted"      // confirm: report from a node whose verdict on the key was refuted
	ActionDelegate       = "delegate"        // this node's calls failed where a peer's passed: its refused calls go through that peer (delegate.go)
)

// Publication results, the result label of fusebox_hints_published_total.
const (
	PublishOpen                     = "open"                       // open hint published
	PublishClosed                   = "closed"                     // closed hint published
	PublishRetryAfter               = "retry_after"                // open hint carrying a destination's Retry-After deadline published
	PublishFailing                  = "failing"                    // failing (early warning) hint published
	PublishSuppressedSuspect        = "suppressed_suspect"         // open hint withheld: this node suspects its egress
	PublishFailingSuppressedSuspect = "failing_suppressed_suspect" // failing hint withheld: this node suspects its egress
	PublishFailingRateLimited       = "failing_ratelimited"        // failing hint withheld: one already went out within Timeout
	PublishFailingMoot              = "failing_moot"               // failing hint not sent: the breaker had left closed/automatic by then
	PublishError                    = "error"                      // the transport refused the hint
)

// policyMetrics are the hint policy's collectors.
type policyMetrics struct {
	probes       *prometheus.CounterVec // role
	actions      *prometheus.CounterVec // action
	published    *prometheus.CounterVec // result: see the Publish* constants
	publishDelay prometheus.Histogram
	suspect      prometheus.Gauge
	precreated   prometheus.Gauge
}

func newPolicyMetrics(reg prometheus.Registerer) (*policyMetrics, error) {
	m := &policyMetrics{
		probes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fusebox_breaker_probes_total",
			Help: "Probe opportunities started by the hint policy, by role (owner, fallback, warm, guard, local, confirm).",
		}, []string{"role"}),
		actions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fusebox_hint_actions_total",
			Help: "What the hint policy did with peers' hints, by action.",
		}, []string{"action"}),
		published: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fusebox_hints_published_total",
			Help: "Local breaker transitions and failure streaks offered for publication, by result " +
				"(open, retry_after, closed, failing, suppressed_suspect, failing_suppressed_suspect, failing_ratelimited, error).",
		}, []string{"result"}),
		publishDelay: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "fusebox_hint_publish_delay_seconds",
			Help: "Time from a local breaker transition to its hint being handed to the transport (same clock). " +
				"Cross-node delivery delay is measured by BenchmarkHintDelay.",
			Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, 1},
		}),
		suspect: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "fusebox_node_suspect",
			Help: "1 while this node suspects its own egress (a burst of its breakers opened) and withholds open hints.",
		}),
		precreated: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "fusebox_hint_precreated_breakers",
			Help: "Breakers created by peers' open hints for keys this node had not used, not yet used.",
		}),
	}
	for _, r := range []string{ProbeOwner, ProbeFallback, ProbeWarm, ProbeGuard, ProbeLocal, ProbeConfirm} {
		m.probes.WithLabelValues(r)
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.probes, m.actions, m.published, m.publishDelay, m.suspect, m.precreated} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("hintpolicy: registering policy metrics: %w", err)
		}
	}
	return m, nil
}
