package queue_test

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"fusebox/internal/testwait"
	"fusebox/queue"
	"fusebox/queue/queuetest"
	"fusebox/transport"
)

// A slow destination's deferred tasks are recalled when it speeds up: its
// tasks were deferred to turns at its old pace (10 calls/s: 150 tasks over
// about 15 s), and once it answers at once its group runs dry, so the
// shard reads its deferred tasks back before their turns (recall.go)
// instead of leaving the destination idle until they come due. Every task
// is still called once, with one attempt.
func TestDeferredTasksRecalledWhenDestinationSpeedsUp(t *testing.T) {
	const slowN, slowCalls = 150, 15
	const callTime = 100 * time.Millisecond // concurrency 1: 10 calls/s until it speeds up
	lim := queuetest.DefaultLimits()
	e := newEnv(t, 1, lim)
	slow := lim
	slow.BufferSize, slow.Concurrency = 2, 1
	e.limits.SetDestination("http://slow.test", slow)
	var fast atomic.Bool
	exec := newFakeExec(false)
	exec.answer = func(r transport.Request) (transport.Result, error) {
		if !fast.Load() {
			tm := time.NewTimer(callTime) // the destination's answer time, not a wait for a condition
			defer tm.Stop()
			<-tm.C
		}
		return transport.Result{Outcome: transport.OutcomeSucceeded, Status: 200}, nil
	}
	cfg := fastCfg()
	cfg.MaxPendingPerShard = 20
	cfg.DeferAfter = 100 * time.Millisecond
	e.start(t, cfg, exec, nil)
	tasks := make([]queue.Task, slowN)
	for i := range tasks {
		tasks[i] = callback(fmt.Sprintf("slow-%03d", i), 0, "http://slow.test", "http://slow.test/cb")
	}
	e.add(t, tasks...)
	deferred := func() float64 {
		return metric(t, e.reg, "fusebox_queue_task_results_total", map[string]string{"outcome": "deferred"})
	}
	testwait.For(t, 10*time.Second, "slow calls made and tasks deferred", func() bool {
		return callsTo(exec, "http://slow.test/cb") >= slowCalls && deferred() > 0
	})
	fast.Store(true)
	sped := time.Now()
	// At the old pace the last deferred turns are over 10 s away.
	testwait.For(t, 5*time.Second, "every task delivered once the destination sped up", func() bool {
		return e.allStatus(tasks, queue.StatusSucceeded)
	})
	t.Logf("%v deferred, %v recalled; all delivered %v after the speed-up",
		deferred(), metric(t, e.reg, "fusebox_queue_deferred_recalled_total", nil), time.Since(sped).Round(time.Millisecond))
	if n := metric(t, e.reg, "fusebox_queue_deferred_recalled_total", nil); n == 0 {
		t.Fatal("no deferred task recalled")
	}
	calls := map[string]int{}
	exec.mu.Lock()
	for _, c := range exec.calls {
		calls[c.req.RequestID]++
	}
	exec.mu.Unlock()
	for _, tk := range tasks {
		if calls[tk.ID] != 1 {
			t.Errorf("task %s called %d times, want 1", tk.ID, calls[tk.ID])
		}
		if got, _ := e.store.Task(tk.ID); got.Attempts != 1 {
			t.Errorf("task %s has %d attempts, want 1", tk.ID, got.Attempts)
		}
	}
}
