package node

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sony/gobreaker/v2"

	"fusebox/api"
	"fusebox/dynconfig"
	"fusebox/internal/deliverybench"
	"fusebox/internal/testwait"
	"fusebox/transport/transporttest"
)

// Active health checks (issue 19 §4), measured: a Nexus endpoint whose
// destination answers 503 for healthOutage while healthBacklog tasks wait,
// on 3 in-process nodes; breaker Timeout and health interval are both
// healthInterval, so the breakers' own probes and the health checks run at
// the same cadence.
const (
	healthOutage   = 10 * time.Second
	healthBacklog  = 300
	healthInterval = time.Second
	// healthHintBudget is the recovery target's allowance beyond one
	// interval: the owner's probe task and its recovery hint to the peers
	// (about 1 ms on loopback, docs/design.md), with room for a loaded box.
	healthHintBudget = 250 * time.Millisecond
	// healthGrace: a call admitted just before the last breaker opened may
	// reach the destination a little after; it is not a probe.
	healthGrace = 100 * time.Millisecond
)

// BenchmarkHealthCheckOutage runs the outage once per mode on one 3-node
// cluster (run it with -benchtime=1x): health (the endpoint has a health
// check) and no_health (the same fleet, an endpoint without one: today's
// behaviour, the same-run baseline). Each mode has its own destination and
// endpoint, so the two never share a breaker.
//
// probe-calls are the real tasks the destination received from
// healthGrace after every node's breaker was open until it recovered (target 0 with a health
// check); outage-calls are all the real tasks it received while down (the
// calls that tripped the breakers included); health-calls the health GETs.
// first-delivery-s is the first task delivered after the destination came
// back; all-closed-s when every node's breaker had closed; target-s is one
// health interval + healthHintBudget.
func BenchmarkHealthCheckOutage(b *testing.B) {
	bc := startBenchCluster(b, b, DefaultShards)
	for _, mode := range []string{"health", "no_health"} {
		b.Run(mode, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				healthOutageRun(b, bc, fmt.Sprintf("bench-%s-%d", mode, healthRuns.Add(1)), mode == "health")
			}
		})
	}
}

// healthRuns names each run's endpoint (and its tasks' request ids) anew:
// -count repeats a sub-benchmark on the same cluster.
var healthRuns atomic.Int64

func healthOutageRun(b *testing.B, bc *benchCluster, ep string, withHealth bool) {
	dest := transporttest.NewDestination(b)
	e := api.Endpoint{Name: ep, URL: dest.NexusURL()}
	if withHealth {
		e.Health = &api.EndpointHealth{URL: dest.HealthURL(), Interval: healthInterval.String(), Timeout: "500ms"}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := bc.clients[0].PutEndpoint(ctx, e)
	if err != nil {
		b.Fatal(err)
	}
	for _, n := range bc.nodes {
		if err := n.store.WaitForApplied(ctx, res.Index); err != nil {
			b.Fatal(err)
		}
	}
	bc.setConfig(b, dynconfig.KeyBreakerSettings, ep, fmt.Sprintf(`{"Timeout":%q}`, healthInterval.String()))
	// One call in flight per node: calls admitted before a breaker opened
	// reach the destination within healthGrace of the last opening.
	bc.setConfig(b, dynconfig.KeyGroupLimiterConcurrency, ep, "1")
	if err := dest.SetMode(transporttest.ModeUnavailable); err != nil {
		b.Fatal(err)
	}
	tasks := make([]api.TaskSubmit, healthBacklog)
	for i := range tasks {
		tasks[i] = echoTask(ep, fmt.Sprintf("wf-%s-%d", ep, i), fmt.Sprintf("%s-%d", ep, i))
	}
	b.ResetTimer()
	start := time.Now()
	recovery := start.Add(healthOutage)
	ids := deliverybench.SubmitAll(b, bc.clients, tasks)
	k := healthKey(ep)
	testwait.For(b, healthOutage, "every node's breaker open", func() bool { return allOpen(bc.nodes, k) })
	allOpenAt := time.Now()
	time.Sleep(time.Until(recovery)) // the schedule itself, not a wait for a condition
	if err := dest.SetMode(transporttest.ModeUp); err != nil {
		b.Fatal(err)
	}
	back := time.Now()
	testwait.For(b, time.Minute, "every node's breaker closed", func() bool {
		for _, n := range bc.nodes {
			if br, ok := n.pool.Lookup(k); ok && br.State() != gobreaker.StateClosed {
				return false
			}
		}
		return true
	})
	allClosed := time.Since(back)
	bc.waitSucceeded(b, ids)
	b.StopTimer()

	var probe, outage, health int
	var first time.Time
	for _, c := range dest.Calls() {
		switch {
		case c.Kind == transporttest.KindHealth:
			health++
		case c.Kind != transporttest.KindStart:
		case c.At.Before(back):
			outage++
			if !c.At.Before(allOpenAt.Add(healthGrace)) {
				probe++
			}
		case c.Status >= 200 && c.Status < 300 && (first.IsZero() || c.At.Before(first)):
			first = c.At
		}
	}
	b.ReportMetric(float64(probe), "probe-calls")
	b.ReportMetric(float64(outage), "outage-calls")
	b.ReportMetric(float64(health), "health-calls")
	b.ReportMetric(first.Sub(back).Seconds(), "first-delivery-s")
	b.ReportMetric(allClosed.Seconds(), "all-closed-s")
	b.ReportMetric((healthInterval + healthHintBudget).Seconds(), "target-s")
}
