package queue_test

import (
	"sync/atomic"
	"testing"
	"time"

	"fusebox/internal/testwait"
	"fusebox/queue"
	"fusebox/queue/queuetest"
)

// A slow destination's deferred tasks are recalled when it speeds up: its
// tasks were deferred to turns at its old pace (10 calls/s: 150 tasks over
// about 15 s), and once it answers at once its group runs dry, so the
// shard reads its deferred tasks back before their turns (recall.go)
// instead of leaving the destination idle until they come due. Every task
// is still called once, with one attempt.
func TestDeferredTasksRecalledWhenDestinationSpeedsUp(t *testing.T) {
	const slowN, slowCalls = 150, 15
	var fast atomic.Bool
	exec := newFakeExec(false)
	exec.answer = slowAnswer(100*time.Millisecond, &fast) // concurrency 1: 10 calls/s until it speeds up
	e := startDeferring(t, exec, func(l *queuetest.LimitValues) { l.BufferSize, l.Concurrency = 2, 1 })
	tasks := tasksTo("slow", slowN, "http://slow.test")
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
	recalled := metric(t, e.reg, "fusebox_queue_deferred_recalled_total", nil)
	t.Logf("%v deferred, %v recalled; all delivered %v after the speed-up", deferred(), recalled, time.Since(sped).Round(time.Millisecond))
	if recalled == 0 {
		t.Fatal("no deferred task recalled")
	}
	calledOnce(t, e, exec, tasks)
}
