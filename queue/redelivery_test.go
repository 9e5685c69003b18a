package queue_test

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"fusebox/internal/testwait"
	"fusebox/queue"
	"fusebox/queue/queuetest"
)

// waitMarked waits until every task carries a start marker of epoch.
func waitMarked(t *testing.T, e *env, epoch uint64, tasks ...queue.Task) {
	t.Helper()
	testwait.For(t, 10*time.Second, "start markers written", func() bool {
		for _, tk := range tasks {
			if got, _ := e.store.Task(tk.ID); got.AttemptEpoch != epoch {
				return false
			}
		}
		return true
	})
}

// A shard moves while its calls are held at the destination: the old
// owner counts what it abandoned, the new owner finds the start markers of
// the old epoch and counts the interrupted attempts it delivers again.
func TestInterruptedAttemptsCountedByNextOwner(t *testing.T) {
	e := newEnv(t, 1, queuetest.DefaultLimits())
	execA, execB := newFakeExec(true), newFakeExec(false)
	regA, regB := prometheus.NewRegistry(), prometheus.NewRegistry()
	e.startNode(t, "a", fastCfg(), execA, nil, regA)
	e.startNode(t, "b", fastCfg(), execB, nil, regB)
	tasks := callbacks(2, 1, "int", "d")
	e.add(t, tasks...)
	testwait.For(t, 10*time.Second, "a calling both", func() bool { _, in, _ := execA.stats(); return in == 2 })
	waitMarked(t, e, 1, tasks...)

	m := singleOwnerMap(t, 1, "b", 2, 2)
	if _, err := e.holder.Store(m); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 10*time.Second, "b delivers both", func() bool { return e.allStatus(tasks, queue.StatusSucceeded) })
	if got := metric(t, regB, "fusebox_queue_interrupted_attempts_total", nil); got != 2 {
		t.Errorf("b counted %v interrupted attempts, want 2", got)
	}
	if got := metric(t, regA, "fusebox_queue_abandoned_calls_total", map[string]string{"reason": "in_flight"}); got != 2 {
		t.Errorf("a counted %v abandoned calls, want 2", got)
	}
	if got := metric(t, regA, "fusebox_queue_interrupted_attempts_total", nil); got != 0 {
		t.Errorf("a counted %v interrupted attempts of its own calls, want 0", got)
	}
	for _, tk := range tasks {
		if got, _ := e.store.Task(tk.ID); got.AttemptEpoch != 0 {
			t.Errorf("task %s delivered keeps attempt epoch %d", tk.ID, got.AttemptEpoch)
		}
	}
}

// A node that stops with a call under way and comes back at the same epoch
// (a restart quicker than failure detection) counts the attempt it had
// begun before.
func TestInterruptedAttemptCountedAfterRestartAtSameEpoch(t *testing.T) {
	e := newEnv(t, 1, queuetest.DefaultLimits())
	cfg := fastCfg()
	cfg.DrainTimeout = 50 * time.Millisecond
	held := newFakeExec(true)
	q1 := e.startNode(t, "a", cfg, held, nil, prometheus.NewRegistry())
	tk := callback("restart", 0, "d", "http://127.0.0.1:9/cb")
	e.add(t, tk)
	waitMarked(t, e, 1, tk)
	if err := q1.Close(); err != nil { // the held call is cancelled: no result
		t.Fatal(err)
	}
	if got, _ := e.store.Task(tk.ID); got.Status != queue.StatusPending || got.AttemptEpoch != 1 {
		t.Fatalf("after the stop the task is %+v, want pending with its marker", got)
	}

	reg := prometheus.NewRegistry()
	e.startNode(t, "a", cfg, newFakeExec(false), nil, reg)
	testwait.For(t, 10*time.Second, "the task delivered", func() bool {
		return e.allStatus([]queue.Task{tk}, queue.StatusSucceeded)
	})
	if got := metric(t, reg, "fusebox_queue_interrupted_attempts_total", nil); got != 1 {
		t.Errorf("restarted node counted %v interrupted attempts, want 1", got)
	}
}
