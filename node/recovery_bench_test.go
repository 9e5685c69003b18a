package node

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"fusebox/api"
	"fusebox/breakerpool"
	"fusebox/dynconfig"
	"fusebox/internal/deliverybench"
	"fusebox/transport"
	"fusebox/transport/transporttest"
)

// Recovery drain (issue 20 §5). The measurement, scaled down: a
// destination answers 503 for recoveryOutage while recoveryTasks tasks are
// submitted evenly over recoveryWindow; its breaker Timeout is
// recoveryTimeout and each host delivers to it at recoveryRate calls/s.
// Before the fix the tasks an open breaker had refused waited out their own
// growing reschedule delays (3 s × 1.5ⁿ) after the destination was back;
// now the close releases them at once, paced by the rate limit.
const (
	recoveryOutage  = 15 * time.Second
	recoveryWindow  = 20 * time.Second
	recoveryTasks   = 1000
	recoveryTimeout = 2 * time.Second
	recoveryRate    = 100 // calls/s per host
	recoveryTick    = 100 * time.Millisecond
)

// BenchmarkRecoveryDrain runs the schedule once per mode on a fresh 3-node
// cluster (run it with -benchtime=1x): outage (503 for recoveryOutage from
// the first submit) and no_outage, the same schedule with the destination
// up throughout, as the same-run baseline.
//
// drain-s is when the last task submitted before the recovery instant was
// delivered (its 2xx at the destination), after that instant; target-s is
// the bound, breaker Timeout + backlog/rate + 2 s, with the backlog
// the tasks submitted and not delivered at the recovery and rate the three
// hosts' limits together; drain/target must stay <= 1. total-s is the last
// delivery of all after the first submit (the baseline's is the schedule
// itself).
func BenchmarkRecoveryDrain(b *testing.B) {
	for _, mode := range []string{"outage", "no_outage"} {
		clusters := &lazyCluster{parent: b}
		b.Run(mode, func(b *testing.B) {
			bc := clusters.get(b, DefaultShards)
			recoveryRun(b, bc, mode == "outage")
		})
		clusters.close()
	}
}

func recoveryRun(b *testing.B, bc *benchCluster, outage bool) {
	dest := transporttest.NewDestination(b)
	host := transport.BreakerDestination(breakerpool.TaskGroupCallback, dest.CallbackURL())
	bc.setConfig(b, dynconfig.KeyBreakerSettings, host, fmt.Sprintf(`{"Timeout":%q}`, recoveryTimeout.String()))
	bc.setConfig(b, dynconfig.KeyHostSchedulerMaxTaskRPS, host, fmt.Sprint(recoveryRate))
	// Release on close alone: the recovery ramp (BenchmarkRecoveryRamp) would
	// pace the backlog below the rate this target assumes.
	bc.setConfig(b, dynconfig.KeyRampDuration, host, `"0s"`)
	if outage {
		if err := dest.SetMode(transporttest.ModeUnavailable); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	start := time.Now()
	recovery := start.Add(recoveryOutage)
	var (
		mu     sync.Mutex
		ids    []string
		before = map[string]bool{} // request ids submitted before the recovery
		failed error
	)
	perTick := recoveryTasks / int(recoveryWindow/recoveryTick)
	done := make(chan struct{})
	go func() { // the paced submitter; ends with the schedule
		defer close(done)
		tick := time.NewTicker(recoveryTick)
		defer tick.Stop()
		for i := 0; i*perTick < recoveryTasks; i++ {
			batch := make([]api.TaskSubmit, perTick)
			for j := range batch {
				batch[j] = deliverybench.Task(dest.CallbackURL(), fmt.Sprintf("rec-%d-%d", i, j), true)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			res, err := bc.clients[i%len(bc.clients)].SubmitTasks(ctx, batch)
			cancel()
			mu.Lock()
			if err != nil {
				failed = err
				mu.Unlock()
				return
			}
			for k, r := range res.Results {
				ids = append(ids, r.TaskID)
				if time.Now().Before(recovery) {
					before[batch[k].Request.NexusRequestID] = true
				}
			}
			mu.Unlock()
			<-tick.C
		}
	}()
	time.Sleep(time.Until(recovery)) // the schedule itself, not a wait for a condition
	if outage {
		if err := dest.SetMode(transporttest.ModeUp); err != nil {
			b.Fatal(err)
		}
	}
	mu.Lock()
	backlog := len(before) - successes(dest, before)
	mu.Unlock()
	<-done
	if failed != nil {
		b.Fatalf("submit: %v", failed)
	}
	bc.waitSucceeded(b, ids)
	b.StopTimer()

	var lastBefore, last time.Time
	for _, c := range dest.Calls() {
		if c.Status < 200 || c.Status >= 300 {
			continue
		}
		if c.At.After(last) {
			last = c.At
		}
		if before[c.RequestID] && c.At.After(lastBefore) {
			lastBefore = c.At
		}
	}
	drain := max(lastBefore.Sub(recovery).Seconds(), 0)
	target := recoveryTimeout.Seconds() + float64(backlog)/float64(recoveryRate*len(bc.nodes)) + 2
	b.ReportMetric(drain, "drain-s")
	b.ReportMetric(target, "target-s")
	b.ReportMetric(drain/target, "drain/target")
	b.ReportMetric(float64(backlog), "backlog-at-recovery")
	b.ReportMetric(last.Sub(start).Seconds(), "total-s")
	b.ReportMetric(float64(successes(dest, nil))/float64(len(ids)), "deliveries/task")
}

// successes counts the destination's 2xx answers (to the request ids in
// only, when it is not nil).
func successes(d *transporttest.Destination, only map[string]bool) int {
	n := 0
	for _, c := range d.Calls() {
		if c.Status >= 200 && c.Status < 300 && (only == nil || only[c.RequestID]) {
			n++
		}
	}
	return n
}
