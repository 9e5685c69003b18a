package queue_test

import (
	"fmt"
	"math"
	"testing"
	"time"

	"fusebox/internal/testwait"
	"fusebox/queue"
	"fusebox/queue/queuetest"
)

// Many namespaces calling one host that answers nothing do not hold back
// the shard's other destinations. Each namespace is a key of its own with
// its concurrency and buffer, so ten of them filled the shard's window with
// dispatched calls, none held, and deferral had nothing to write back: the
// fast destination's tasks waited for the host to answer (here, never: the
// test timed out). Now the host may have half the window dispatched
// (DestinationShare), its further tasks are held and then deferred, and
// every task is still called exactly once.
func TestManyNamespacesOnAHangingHostDoNotHoldBackOthers(t *testing.T) {
	exec, answerAll := hangingSlowExec()
	e := startDeferring(t, exec, func(l *queuetest.LimitValues) {
		l.BufferSize, l.Concurrency, l.MaxTaskRPS = 2, 2, math.Inf(1)
	})
	t.Cleanup(answerAll) // before the queue's Close, which waits for its calls
	slow, fast := namespacesThenOthers(t, e, exec, 10, 20, 5)
	if n := callsTo(exec, "http://slow.test/cb"); n > 10 {
		t.Fatalf("%d calls to the hanging host, want at most its share of the window (10)", n)
	}
	if d := metric(t, e.reg, "fusebox_queue_task_results_total", map[string]string{"outcome": "deferred"}); d == 0 {
		t.Fatal("nothing deferred, yet the fast tasks went")
	}
	answerAll()
	testwait.For(t, 60*time.Second, "every slow task delivered", func() bool { return e.allStatus(slow, queue.StatusSucceeded) })
	calledOnce(t, e, exec, append(slow, fast...))
}

// The same with a host that answers, slowly (each call 100 ms, so its ten
// namespaces' 200 tasks take a second at its share): the fast destination's
// tasks go before half of the host's calls, and no task is written back
// more than about once.
func TestManyNamespacesOnASlowHostDoNotHoldBackOthers(t *testing.T) {
	exec := newFakeExec(false)
	exec.answer = slowAnswer(100*time.Millisecond, nil)
	e := startDeferring(t, exec, func(l *queuetest.LimitValues) {
		l.BufferSize, l.Concurrency, l.MaxTaskRPS = 2, 2, math.Inf(1)
	})
	const namespaces, perNS = 10, 20
	slow, fast := namespacesThenOthers(t, e, exec, namespaces, perNS, 5)
	if n := callsTo(exec, "http://slow.test/cb"); n >= namespaces*perNS/2 {
		t.Fatalf("the fast destination's tasks waited for %d of the slow host's %d calls", n, namespaces*perNS)
	}
	testwait.For(t, 60*time.Second, "every slow task delivered", func() bool { return e.allStatus(slow, queue.StatusSucceeded) })
	calledOnce(t, e, exec, append(slow, fast...))
	d := metric(t, e.reg, "fusebox_queue_task_results_total", map[string]string{"outcome": "deferred"})
	t.Logf("%v deferrals for %d tasks", d, len(slow))
	if maxD := float64(len(slow) + len(slow)/2); d > maxD {
		t.Fatalf("%v deferrals for %d tasks, want at most %v", d, len(slow), maxD)
	}
}

// namespacesThenOthers adds perNS tasks for http://slow.test in each of
// namespaces namespaces, interleaved (each read takes a few of every
// namespace, so no one key fills its buffer), waits until ten of them are
// being called (the shard's window of 20 is then full), then adds
// fastN for http://fast.test and waits until those are delivered.
func namespacesThenOthers(t *testing.T, e *env, exec *fakeExec, namespaces, perNS, fastN int) (slow, fast []queue.Task) {
	t.Helper()
	for i := range perNS {
		for ns := range namespaces {
			tk := callback(fmt.Sprintf("slow-%03d-%02d", i, ns), 0, "http://slow.test", "http://slow.test/cb")
			tk.NamespaceID = fmt.Sprintf("ns-%02d", ns)
			slow = append(slow, tk)
		}
	}
	e.add(t, slow...)
	testwait.For(t, 10*time.Second, "calls to the slow host under way", func() bool {
		return callsTo(exec, "http://slow.test/cb") >= 10
	})
	fast = tasksTo("fast", fastN, "http://fast.test")
	e.add(t, fast...)
	testwait.For(t, 10*time.Second, "the fast destination's tasks delivered", func() bool { return e.allStatus(fast, queue.StatusSucceeded) })
	return slow, fast
}

// Many namespaces calling one fast host fill the window too (their share
// dispatched, the rest held), but nothing is deferred: its tasks leave the
// window as fast as they come, and a write each would only cost the node.
func TestManyNamespacesOnAFastHostAreNotDeferred(t *testing.T) {
	exec := newFakeExec(false)
	e := newEnv(t, 1, queuetest.DefaultLimits())
	lim := queuetest.DefaultLimits()
	lim.BufferSize, lim.Concurrency, lim.MaxTaskRPS = 2, 2, math.Inf(1)
	e.limits.SetDestination("http://slow.test", lim)
	cfg := fastCfg()
	cfg.MaxPendingPerShard = 20 // a share of 10; DeferAfter the default 2 s
	e.start(t, cfg, exec, nil)
	var tasks []queue.Task
	for i := range 40 {
		for ns := range 10 {
			tk := callback(fmt.Sprintf("t-%03d-%02d", i, ns), 0, "http://slow.test", "http://slow.test/cb")
			tk.NamespaceID = fmt.Sprintf("ns-%02d", ns)
			tasks = append(tasks, tk)
		}
	}
	e.add(t, tasks...)
	testwait.For(t, 30*time.Second, "every task delivered", func() bool { return e.allStatus(tasks, queue.StatusSucceeded) })
	calledOnce(t, e, exec, tasks)
	if n := metric(t, e.reg, "fusebox_queue_scheduler_rejections_total", map[string]string{"reason": "destination_share"}); n == 0 {
		t.Fatal("no task held for the host's share: the test did not fill the window")
	}
	if d := metric(t, e.reg, "fusebox_queue_task_results_total", map[string]string{"outcome": "deferred"}); d != 0 {
		t.Fatalf("%v tasks of a fast host deferred, want 0", d)
	}
}

// A host that stops answering is paced by the age of its calls, which only
// grows while it hangs, and a task read back while it still hangs goes
// after the turns given before: the turns ran on, seconds past the host's
// recovery here after three rounds (tens of seconds at the defaults). A recall brings them back when it answers again,
// but only on the shard instance that deferred them; after a move they
// waited for those turns. Turns from an age are now never more than five
// DeferAfters ahead.
func TestHangingHostTurnsStayNear(t *testing.T) {
	exec, answerAll := hangingSlowExec()
	e := startDeferring(t, exec, func(l *queuetest.LimitValues) {
		l.BufferSize, l.Concurrency, l.MaxTaskRPS = 2, 2, math.Inf(1)
	})
	t.Cleanup(answerAll)
	slow, _ := namespacesThenOthers(t, e, exec, 10, 20, 5)
	const limit = 5*100*time.Millisecond + 100*time.Millisecond // maxShareAhead DeferAfters, and slack
	furthest := func() time.Duration {
		var f time.Duration
		for _, tk := range slow {
			if got, _ := e.store.Task(tk.ID); got.Status == queue.StatusPending {
				f = max(f, time.Until(got.NextAttemptAt))
			}
		}
		return f
	}
	testwait.For(t, 20*time.Second, "every slow task deferred three times, or a turn past the limit", func() bool {
		return furthest() > limit ||
			metric(t, e.reg, "fusebox_queue_task_results_total", map[string]string{"outcome": "deferred"}) >= float64(3*len(slow))
	})
	if f := furthest(); f > limit {
		t.Fatalf("a deferred task's turn is %v ahead, want at most %v", f.Round(time.Millisecond), limit)
	}
	answerAll()
	testwait.For(t, 60*time.Second, "every slow task delivered", func() bool { return e.allStatus(slow, queue.StatusSucceeded) })
}
