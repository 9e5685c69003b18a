package e2e

import (
	"fmt"
	"testing"
	"time"

	"fusebox/api"
	"fusebox/breakerpool"
	"fusebox/internal/deliverybench"
	"fusebox/internal/testwait"
	"fusebox/transport"
)

// TestTasksBurstDoesNotHoldBackOtherDestinations: a burst for one
// rate-limited destination, larger than every shard's window together (16
// shards × 1,000 tasks held in memory), does not hold back another
// destination's tasks submitted after it. Before queue/defer.go the other
// destination's tasks waited until the burst had drained to the windows:
// (24,000 − 16,000) tasks at 20 calls/s for each of 3 namespaces on each of
// 3 nodes, over 40 s (the test's 30 s deadline passed with none of them
// delivered). Now the burst's tasks whose turn is far off are written back
// due at it, and the windows keep room for the others (delivered about
// 0.1 s after their submit).
func TestTasksBurstDoesNotHoldBackOtherDestinations(t *testing.T) {
	const burst, others, rps = 24000, 10, 20
	c := newTaskCluster(t, 3)
	slow, fast := NewDest(t), NewDest(t)
	setConfig(t, c, keyRPS, transport.BreakerDestination(breakerpool.TaskGroupCallback, slow.CallbackURL()), fmt.Sprint(rps))
	var clients []*api.Client
	for _, p := range c.Procs {
		clients = append(clients, p.Client())
	}
	tasks := make([]api.TaskSubmit, burst)
	for i := range tasks {
		tasks[i] = callbackTask(fmt.Sprintf("ns-%d", i%3), fmt.Sprintf("burst-%d", i), slow.CallbackURL(), i)
	}
	start := time.Now()
	deliverybench.SubmitAll(t, clients, tasks)
	t.Logf("%d tasks for one destination at %d calls/s per node submitted in %v", burst, rps, time.Since(start).Round(time.Millisecond))
	after := make([]api.TaskSubmit, others)
	for i := range after {
		after[i] = callbackTask("ns-0", fmt.Sprintf("other-%d", i), fast.CallbackURL(), i)
	}
	sent := time.Now()
	deliverybench.SubmitAll(t, clients, after)
	testwait.For(t, 30*time.Second, "the other destination's tasks delivered", func() bool { return len(fast.Deliveries()) == others })
	t.Logf("the other destination's %d tasks delivered %v after their submit; the burst's destination had %d calls",
		others, time.Since(sent).Round(time.Millisecond), len(slow.Calls()))
	c.StopAll(t)
}
