package node

import (
	"fmt"
	"testing"
	"time"

	"fusebox/api"
	"fusebox/breakerpool"
	"fusebox/dynconfig"
	"fusebox/internal/deliverybench"
	"fusebox/internal/testwait"
	"fusebox/transport"
	"fusebox/transport/transporttest"
)

// BenchmarkDeadBacklog's protocol: once every task of the backlog has been
// written back once, deadBacklogSettle for its first rounds (the breaker's
// first probes, and the gentle backoff's first steps on the side with no
// rate bound), then the writes of deadBacklogWindow are counted.
const (
	deadBacklogSettle = 12 * time.Second
	deadBacklogWindow = 8 * time.Second
)

// BenchmarkDeadBacklog is what a dead destination's backlog costs a 3-node
// cluster while its breaker stays open: b.N callback tasks to a destination
// that refuses every connection (breaker Timeout 1 s, so it probes and
// reopens every second), submitted at once; once every task has been
// written back once and deadBacklogSettle has passed, the write-backs over
// the next deadBacklogWindow are counted
// (fusebox_queue_task_results_total{outcome="retry_blocked"} and, with a
// rate limit, "deferred": each one a result row on every replica).
// rate=100: the destination's per-host rate limit is dynconfig's default,
// so its refused tasks come due in turns of 10 ms on each node
// (queue.scheduler.blockedTurn). rate=unlimited: the benchmark clusters'
// lifted limit (1e6 calls/s), which turns do not spread: every refused
// task comes due at the breaker's probe or its gentle backoff, as every key
// did before turns (the baseline). Metrics: writes/task (in the window, per
// task of the backlog), writes/s, and raft-entries/s (the log entries node
// 1 applied in the window).
func BenchmarkDeadBacklog(b *testing.B) {
	for _, mode := range []string{"rate=unlimited", "rate=100"} {
		clusters := &lazyCluster{parent: b}
		dead := transporttest.NewDestination(b)
		if err := dead.SetMode(transporttest.ModeRefuse); err != nil {
			b.Fatal(err)
		}
		b.Run(mode, func(b *testing.B) {
			if b.N == 1 {
				// The framework's probe run. Its one task is the breaker's
				// probe every time the breaker half-opens, so it is written
				// back as a failed call (retry_down), never as refused, and
				// the wait below would not end: what stalled this benchmark
				// in the thirty-third session, not the queue.
				return
			}
			bc := clusters.get(b, DefaultShards)
			host := transport.BreakerDestination(breakerpool.TaskGroupCallback, dead.CallbackURL())
			bc.setConfig(b, dynconfig.KeyBreakerSettings, host, `{"Timeout":"1s","FailureThreshold":2}`)
			if mode == "rate=100" {
				bc.setConfig(b, dynconfig.KeyHostSchedulerMaxTaskRPS, host, "100")
			}
			// A refused task is written back (retry_blocked). A held task of a
			// saturated key may be written back at its turn before it reaches
			// the breaker (deferred, queue/defer.go), though no longer while the
			// breaker is open: counted in case it is.
			blocked := func() float64 {
				return bc.sumMetricWhere(b, "fusebox_queue_task_results_total", "outcome", "retry_blocked") +
					bc.sumMetricWhere(b, "fusebox_queue_task_results_total", "outcome", "deferred")
			}
			before := blocked()
			tasks := make([]api.TaskSubmit, b.N)
			for i := range tasks {
				tasks[i] = deliverybench.Task(dead.CallbackURL(), fmt.Sprintf("%s-%d", mode, i), false)
			}
			b.ResetTimer()
			deliverybench.SubmitAll(b, bc.clients, tasks)
			testwait.For(b, 2*time.Minute, "every task written back once", func() bool {
				return blocked()-before >= float64(b.N)
			})
			time.Sleep(deadBacklogSettle) // the protocol's settling time, not a wait for a condition
			w0, i0, t0 := blocked(), bc.nodes[0].store.Stats().AppliedIndex, time.Now()
			time.Sleep(deadBacklogWindow) // the window measured: the cluster works meanwhile
			writes, entries, took := blocked()-w0, bc.nodes[0].store.Stats().AppliedIndex-i0, time.Since(t0)
			b.StopTimer()
			b.ReportMetric(writes/float64(b.N), "writes/task")
			b.ReportMetric(writes/took.Seconds(), "writes/s")
			b.ReportMetric(float64(entries)/took.Seconds(), "raft-entries/s")
		})
		clusters.close()
	}
}
