package queue

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Result outcomes counted in fusebox_queue_task_results_total.
const (
	outcomeSucceeded       = "succeeded"
	outcomeFailed          = "failed"
	outcomeDLQ             = "dlq"
	outcomeRetryDown       = "retry_down"
	outcomeRetryBlocked    = "retry_blocked"
	outcomeRetryUnexpected = "retry_unexpected"
	outcomeResubmitted     = "resubmitted" // the one immediate resubmit after a breaker rejection
	outcomeReleased        = "released"    // no verdict: aborted, shard lost, closing
	outcomeDeferred        = "deferred"    // held for a saturated key, written back due at its turn (defer.go)
)

// metrics are the queue's Prometheus series.
type metrics struct {
	depth        *prometheus.GaugeVec
	firstAttempt *prometheus.HistogramVec
	done         *prometheus.HistogramVec
	results      *prometheus.CounterVec
	rejections   *prometheus.CounterVec
	rateWait     prometheus.Histogram
	abandoned    *prometheus.CounterVec
	interrupted  prometheus.Counter
	writes       *prometheus.CounterVec
	writeSize    prometheus.Histogram
	rampsStarted prometheus.Counter
	recalled     prometheus.Counter
}

var latencyBuckets = []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600}

func newMetrics(reg prometheus.Registerer, q *Queue) (*metrics, error) {
	m := &metrics{
		depth: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "fusebox_queue_depth", Help: "Pending tasks of each shard this node owns.",
		}, []string{"shard"}),
		firstAttempt: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "fusebox_queue_enqueue_to_first_attempt_seconds", Help: "Time from a task's creation to its first call.",
			Buckets: latencyBuckets,
		}, []string{"task_group"}),
		done: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "fusebox_queue_enqueue_to_done_seconds", Help: "Time from a task's creation to its terminal state.",
			Buckets: latencyBuckets,
		}, []string{"task_group", "status"}),
		results: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fusebox_queue_task_results_total", Help: "Dispositions of dispatched tasks, by outcome.",
		}, []string{"outcome"}),
		rejections: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fusebox_queue_scheduler_rejections_total", Help: "Tasks the scheduler refused, by reason (buffer_full, destination_share, stale_ownership, destination_not_allowed, handover).",
		}, []string{"reason"}),
		rateWait: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "fusebox_queue_rate_limiter_wait_seconds", Help: "Time a task waited for a rate-limiter token.",
			Buckets: []float64{.0001, .001, .005, .01, .05, .1, .5, 1, 5, 30},
		}),
		abandoned: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fusebox_queue_abandoned_calls_total",
			Help: "Calls this node abandoned when it lost their shard, which the next owner makes again: in_flight (cancelled mid-call) or unacked (answered, result not written).",
		}, []string{"reason"}),
		interrupted: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "fusebox_queue_interrupted_attempts_total",
			Help: "Tasks this node found, on taking their shard, with an attempt begun under an earlier owner and no result recorded: calls it makes again that the destination may already have received (a crashed owner's included).",
		}),
		writes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fusebox_queue_completion_writes_total", Help: "Batched result writes, by result (ok, refused, error, dropped).",
		}, []string{"result"}),
		writeSize: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "fusebox_queue_completion_write_size", Help: "Results per batched write.",
			Buckets: prometheus.ExponentialBuckets(1, 2, 10),
		}),
		rampsStarted: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "fusebox_queue_recovery_ramps_started_total", Help: "Recovery ramps begun: a breaker closed and its key's rate restarted from rampStartRPS.",
		}),
		recalled: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "fusebox_queue_deferred_recalled_total",
			Help: "Deferred tasks read back before their turn because their destination drained its backlog sooner than estimated.",
		}),
	}
	if reg == nil {
		return m, nil
	}
	gauge := func(name, help string, f func() float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, f)
	}
	cs := []prometheus.Collector{
		m.depth, m.firstAttempt, m.done, m.results, m.rejections, m.rateWait, m.abandoned, m.interrupted, m.writes, m.writeSize, m.rampsStarted, m.recalled,
		gauge("fusebox_queue_scheduler_buffered", "Tasks waiting in scheduler group buffers.",
			func() float64 { return float64(q.sched.buffered.Load()) }),
		gauge("fusebox_queue_scheduler_active_workers", "Tasks being processed by scheduler workers.",
			func() float64 { return float64(q.sched.active.Load()) }),
		gauge("fusebox_queue_scheduler_groups", "Live scheduler groups.",
			func() float64 { return float64(q.sched.groupCount()) }),
		gauge("fusebox_queue_owned_shards", "Shards this node is working on.",
			func() float64 { return float64(q.ownedCount()) }),
		gauge("fusebox_queue_readers_paused", "Shard readers stopped by history.outboundTaskBatchSize = 0.",
			func() float64 { return float64(q.paused.Load()) }),
		gauge("fusebox_queue_recovery_ramps", "Keys whose rate is ramping up after their breaker closed.",
			func() float64 { return float64(q.sched.rampCount()) }),
	}
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}
