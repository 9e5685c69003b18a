package node

import (
	"fmt"
	"testing"
	"time"

	"github.com/sony/gobreaker/v2"

	"fusebox/api"
	"fusebox/breakerpool"
	"fusebox/dynconfig"
	"fusebox/internal/deliverybench"
	"fusebox/internal/testwait"
	"fusebox/transport"
	"fusebox/transport/transporttest"
)

// Staged recovery (issue 19 §2). A destination is down while rampBacklog
// tasks are submitted; once every node's breaker is open it comes back.
// The probe owner's probe closes its breaker, its hint closes the others.
const (
	rampBacklog  = 3000
	rampStart    = 50 // fusebox.destination.rampStartRPS, fleet-wide
	rampDur      = 5 * time.Second
	rampHostRate = 100 // calls/s per host once the ramp is over
	rampTimeout  = 2 * time.Second
)

// BenchmarkRecoveryRamp runs the outage once per mode on a fresh 3-node
// cluster (-benchtime=1x): ramp (rampStartRPS 50 over rampDuration 5 s)
// and no_ramp, the same schedule with rampDuration 0, the same-run
// baseline. Run one count per process (benchreport does): a second
// cluster in the same process has timed out waiting for its breakers to
// open.
//
// first-second is the calls the destination received in the second after
// the first successful one (the close); first-second/start divides it by
// rampStartRPS (target ≤ 1.1). drain-s is when the last backlog task was
// delivered after the close; target-s is rampDuration + backlog/rate + 2 s
// with rate the three hosts' limits together; drain/target must be ≤ 1.
func BenchmarkRecoveryRamp(b *testing.B) {
	for _, mode := range []string{"ramp", "no_ramp"} {
		clusters := &lazyCluster{parent: b}
		b.Run(mode, func(b *testing.B) {
			bc := clusters.get(b, DefaultShards)
			rampRun(b, bc, mode == "ramp")
		})
		clusters.close()
	}
}

func rampRun(b *testing.B, bc *benchCluster, ramp bool) {
	dest := transporttest.NewDestination(b)
	host := transport.BreakerDestination(breakerpool.TaskGroupCallback, dest.CallbackURL())
	dur := rampDur
	if !ramp {
		dur = 0
	}
	bc.setConfig(b, dynconfig.KeyBreakerSettings, host, fmt.Sprintf(`{"Timeout":%q}`, rampTimeout.String()))
	bc.setConfig(b, dynconfig.KeyHostSchedulerMaxTaskRPS, host, fmt.Sprint(rampHostRate))
	bc.setConfig(b, dynconfig.KeyRampStartRPS, host, fmt.Sprint(rampStart))
	bc.setConfig(b, dynconfig.KeyRampDuration, host, fmt.Sprintf("%q", dur.String()))
	if err := dest.SetMode(transporttest.ModeUnavailable); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	tasks := make([]api.TaskSubmit, rampBacklog)
	for i := range tasks {
		tasks[i] = deliverybench.Task(dest.CallbackURL(), fmt.Sprintf("ramp-%d", i), true)
	}
	ids := deliverybench.SubmitAll(b, bc.clients, tasks)
	key := breakerpool.Key{TaskGroup: breakerpool.TaskGroupCallback, NamespaceID: "ns-bench", Destination: host}
	// Every node has seen the outage: its breaker has opened at least once
	// (a half-open one may then wait long for a task to probe with).
	opened := make([]bool, len(bc.nodes))
	testwait.For(b, time.Minute, "every node's breaker opened", func() bool {
		all := true
		for i, n := range bc.nodes {
			if br, ok := n.pool.Lookup(key); ok && br.State() == gobreaker.StateOpen {
				opened[i] = true
			}
			all = all && opened[i]
		}
		return all
	})
	backlog := rampBacklog - successes(dest, nil)
	if err := dest.SetMode(transporttest.ModeUp); err != nil {
		b.Fatal(err)
	}
	recovery := time.Now()
	bc.waitSucceeded(b, ids)
	b.StopTimer()

	var closed, last time.Time
	for _, c := range dest.Calls() {
		if c.Status < 200 || c.Status >= 300 || c.At.Before(recovery) {
			continue
		}
		if closed.IsZero() || c.At.Before(closed) {
			closed = c.At
		}
		if c.At.After(last) {
			last = c.At
		}
	}
	first := 0
	for _, c := range dest.Calls() {
		if !c.At.Before(closed) && c.At.Sub(closed) < time.Second {
			first++
		}
	}
	drain := last.Sub(closed).Seconds()
	target := rampDur.Seconds() + float64(backlog)/float64(rampHostRate*len(bc.nodes)) + 2
	b.ReportMetric(float64(first), "first-second")
	b.ReportMetric(float64(first)/rampStart, "first-second/start")
	b.ReportMetric(drain, "drain-s")
	b.ReportMetric(target, "target-s")
	b.ReportMetric(drain/target, "drain/target")
	b.ReportMetric(float64(backlog), "backlog-at-recovery")
	b.ReportMetric(closed.Sub(recovery).Seconds(), "up-to-close-s")
}
