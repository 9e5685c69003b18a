package queue_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"fusebox/breakerpool"
	"fusebox/internal/testwait"
	"fusebox/queue"
	"fusebox/queue/queuetest"
	"fusebox/transport"
)

type mapResolver map[string]string

func (m mapResolver) ResolveEndpoint(name string) (string, error) {
	if u, ok := m[name]; ok {
		if strings.HasPrefix(u, "error:") {
			return "", errors.New(u)
		}
		return u, nil
	}
	return "", fmt.Errorf("endpoint %q: %w", name, queue.ErrUnknownEndpoint)
}

func nexusStart(id, endpoint string) queue.Task {
	return queue.Task{
		ID: id, NamespaceID: "ns", WorkflowID: "wf-" + id,
		TaskGroup: breakerpool.TaskGroupNexusInvocation, Destination: endpoint,
		Request: stored(transport.Request{Service: "svc", Operation: "op", Input: []byte(`{"x":1}`)}),
	}
}

func TestPoisonAndUnknownEndpointRouting(t *testing.T) {
	e := newEnv(t, 1, queuetest.DefaultLimits())
	exec := newFakeExec(false)
	cfg := fastCfg()
	cfg.MaxUnexpectedErrors = 2
	e.start(t, cfg, exec, mapResolver{"good": "http://127.0.0.1:9/nexus", "flaky": "error: registry not ready", "bad-url": "ftp://x"})

	unknownGroup := callback("unknown-group", 0, "d", "http://127.0.0.1:9/cb")
	unknownGroup.TaskGroup = "workflow.Timer"
	invalid := callback("invalid", 0, "d", "http://127.0.0.1:9/cb")
	noBody := callbackRequest("http://127.0.0.1:9/cb")
	noBody.Body = nil // a callback needs a body
	invalid.Request = stored(noBody)
	mismatch := callback("mismatch", 0, "d", "http://127.0.0.1:9/cb")
	nexusGroup := callbackRequest("http://127.0.0.1:9/cb")
	nexusGroup.TaskGroup = breakerpool.TaskGroupNexusInvocation
	mismatch.Request = stored(nexusGroup)
	undecodable := callback("undecodable", 0, "d", "http://127.0.0.1:9/cb")
	undecodable.Request = json.RawMessage(`{"timeout":"soon"}`) // stored by another version, say
	tasks := []queue.Task{unknownGroup, invalid, mismatch, undecodable,
		nexusStart("no-endpoint", "missing"), nexusStart("bad-url", "bad-url"),
		nexusStart("flaky", "flaky"), nexusStart("good", "good")}
	e.add(t, tasks...)

	want := map[string]string{
		"unknown-group": queue.StatusDLQ, "invalid": queue.StatusDLQ, "mismatch": queue.StatusDLQ, "undecodable": queue.StatusDLQ,
		"no-endpoint": queue.StatusFailed, "bad-url": queue.StatusFailed,
		"flaky": queue.StatusDLQ, // two unexpected errors (MaxUnexpectedErrors 2): the second ~1 s later
		"good":  queue.StatusSucceeded,
	}
	testwait.For(t, 15*time.Second, "every task terminal", func() bool {
		for id, st := range want {
			if got, _ := e.store.Task(id); got.Status != st {
				return false
			}
		}
		return true
	})
	if n, _, _ := exec.stats(); n != 1 {
		t.Fatalf("executor called %d times, want 1 (only the good task)", n)
	}
	if got, _ := e.store.Task("flaky"); got.Unexpected != 2 || got.Attempts != 0 || !strings.Contains(got.Message, "registry not ready") {
		t.Fatalf("flaky: %+v", got)
	}
	if got, _ := e.store.Task("no-endpoint"); !strings.Contains(got.Message, "unknown nexus endpoint") {
		t.Fatalf("no-endpoint message %q", got.Message)
	}
	if got, _ := e.store.Task("undecodable"); !strings.HasPrefix(got.Message, "poison task") || !strings.Contains(got.Message, "undecodable request") {
		t.Fatalf("undecodable message %q", got.Message)
	}
	exec.mu.Lock()
	req := exec.calls[0].req
	exec.mu.Unlock()
	if req.URL != "http://127.0.0.1:9/nexus" || req.RequestID != "good" || req.Timeout != 10*time.Second || req.TaskGroup != breakerpool.TaskGroupNexusInvocation {
		t.Fatalf("request not completed from the task: %+v", req)
	}
	if got := metric(t, e.reg, "fusebox_queue_task_results_total", map[string]string{"outcome": "dlq"}); got != 5 {
		t.Fatalf("dlq results %v, want 5", got)
	}
}

func TestDownRetriesWithBackoffAndFailedEnds(t *testing.T) {
	e := newEnv(t, 1, queuetest.DefaultLimits())
	exec := newFakeExec(false)
	var downs atomic.Int32
	exec.answer = func(r transport.Request) (transport.Result, error) {
		if strings.Contains(r.URL, "down") && downs.Add(1) <= 2 {
			return transport.Result{Outcome: transport.OutcomeDown, Status: 503, Message: "unavailable"},
				breakerpool.NewDestinationDownError("HTTP 503", errors.New("unavailable"))
		}
		if strings.Contains(r.URL, "reject") {
			return transport.Result{Outcome: transport.OutcomeFailed, Status: 400, Message: "bad input"},
				&transport.FailedError{Status: 400, Message: "bad input"}
		}
		return transport.Result{Outcome: transport.OutcomeSucceeded, Status: 200}, nil
	}
	e.start(t, fastCfg(), exec, nil)
	down := callback("down", 0, "d1", "http://127.0.0.1:9/down")
	reject := callback("reject", 0, "d2", "http://127.0.0.1:9/reject")
	e.add(t, down, reject)
	testwait.For(t, 15*time.Second, "down task succeeds on its third attempt", func() bool {
		return e.allStatus([]queue.Task{down}, queue.StatusSucceeded) && e.allStatus([]queue.Task{reject}, queue.StatusFailed)
	})
	res := e.store.Results("down")
	if len(res) != 3 || res[0].Status != queue.StatusPending || res[1].Status != queue.StatusPending || res[2].Attempts != 3 {
		t.Fatalf("down results: %+v", res)
	}
	// The gaps between attempts follow 1 s × 2ⁿ × [0.8, 1.0).
	created, _ := e.store.Task("down")
	gap1 := res[0].NextAttemptAt.Sub(created.CreatedAt)
	gap2 := res[1].NextAttemptAt.Sub(res[0].NextAttemptAt)
	if gap1 < 800*time.Millisecond || gap1 > 2*time.Second || gap2 < 1600*time.Millisecond || gap2 > 3*time.Second {
		t.Fatalf("backoff gaps %v, %v; want ≈[0.8,1)s then ≈[1.6,2)s", gap1, gap2)
	}
	got, _ := e.store.Task("reject")
	if got.Attempts != 1 || got.HTTPStatus != 400 || got.Message != "bad input" {
		t.Fatalf("rejected task: %+v", got)
	}
}

func TestPanickingExecutorEndsInDLQ(t *testing.T) {
	e := newEnv(t, 1, queuetest.DefaultLimits())
	exec := newFakeExec(false)
	exec.answer = func(transport.Request) (transport.Result, error) { panic("boom") }
	cfg := fastCfg()
	cfg.MaxUnexpectedErrors = 1
	e.start(t, cfg, exec, nil)
	e.add(t, callback("p", 0, "d", "http://127.0.0.1:9/cb"))
	testwait.For(t, 10*time.Second, "dlq", func() bool { got, _ := e.store.Task("p"); return got.Status == queue.StatusDLQ })
	if got, _ := e.store.Task("p"); !strings.Contains(got.Message, "boom") || got.Attempts != 1 {
		t.Fatalf("panicked task: %+v", got)
	}
}

func TestTransientWriteErrorsRetried(t *testing.T) {
	e := newEnv(t, 1, queuetest.DefaultLimits())
	e.store.FailCompletes(2, errors.New("raft: no leader"))
	e.start(t, fastCfg(), newFakeExec(false), nil)
	tasks := callbacks(20, 1, "w", "d")
	e.add(t, tasks...)
	testwait.For(t, 10*time.Second, "delivered", func() bool { return e.allStatus(tasks, queue.StatusSucceeded) })
	if got := metric(t, e.reg, "fusebox_queue_completion_writes_total", map[string]string{"result": "error"}); got != 2 {
		t.Fatalf("failed writes %v, want 2", got)
	}
	if w := e.store.Writes(); w >= 20 {
		t.Fatalf("%d writes for 20 results: not batched", w)
	}
	for _, tk := range tasks {
		if n := len(e.store.Results(tk.ID)); n != 1 {
			t.Fatalf("task %s has %d results", tk.ID, n)
		}
	}
}

func TestCloseDrainsAndFlushes(t *testing.T) {
	e := newEnv(t, 1, queuetest.DefaultLimits())
	exec := newFakeExec(true)
	q := e.start(t, fastCfg(), exec, nil)
	tasks := callbacks(4, 1, "drain", "d")
	e.add(t, tasks...)
	testwait.For(t, 10*time.Second, "calls in flight", func() bool { _, in, _ := exec.stats(); return in == 4 })
	done := make(chan struct{})
	go func() { _ = q.Close(); close(done) }()
	select {
	case <-done:
		t.Fatal("Close returned while calls were in flight")
	case <-time.After(50 * time.Millisecond): // Close must wait; this only gives it a chance to be wrong
	}
	close(exec.release)
	<-done
	if !e.allStatus(tasks, queue.StatusSucceeded) {
		t.Fatal("results of drained calls were not written by Close")
	}
	_ = q.Close() // idempotent
}

func TestCloseCancelsAfterDrainTimeout(t *testing.T) {
	e := newEnv(t, 1, queuetest.DefaultLimits())
	exec := newFakeExec(true)
	cfg := fastCfg()
	cfg.DrainTimeout = 50 * time.Millisecond
	q := e.start(t, cfg, exec, nil)
	tasks := callbacks(3, 1, "abort", "d")
	e.add(t, tasks...)
	testwait.For(t, 10*time.Second, "calls in flight", func() bool { _, in, _ := exec.stats(); return in == 3 })
	_ = q.Close()
	for _, tk := range tasks {
		got, _ := e.store.Task(tk.ID)
		if got.Status != queue.StatusPending || got.Attempts != 0 {
			t.Fatalf("aborted task %s: %+v, want pending with no attempt counted", tk.ID, got)
		}
	}
}

// Close ends while the store does not answer: the writes under way get
// FlushTimeout, then are cancelled, and their tasks stay pending (none is
// lost: the calls' results are simply not written). Close waited for the
// write for good, and a node's shutdown with its database paused ended in
// its hard timeout, exit 1, without leaving the cluster.
func TestCloseWithTheStoreHung(t *testing.T) {
	e := newEnv(t, 1, queuetest.DefaultLimits())
	exec := newFakeExec(false)
	cfg := fastCfg()
	cfg.FlushTimeout = 100 * time.Millisecond
	q := e.start(t, cfg, exec, nil)
	release := e.store.HangCompletes()
	defer release()
	tasks := callbacks(3, 1, "hung", "d")
	e.add(t, tasks...)
	testwait.For(t, 10*time.Second, "a result write to hang", func() bool { return e.store.Hanging() > 0 })
	done := make(chan struct{})
	go func() { _ = q.Close(); close(done) }()
	testwait.For(t, 30*time.Second, "Close to return with the store hung", func() bool {
		select {
		case <-done:
			return true
		default:
			return false
		}
	})
	for _, tk := range tasks {
		if got, _ := e.store.Task(tk.ID); got.Status != queue.StatusPending {
			t.Fatalf("task %s: %+v; want still pending (its result was not written)", tk.ID, got)
		}
	}
}

func TestConfigAndDepsValidation(t *testing.T) {
	e := newEnv(t, 1, queuetest.DefaultLimits())
	full := queue.Deps{Store: e.store, Ownership: queuetest.HolderOwnership(e.holder, "a"), Limits: e.limits,
		Breakers: queue.PoolBreakers(e.pool), Executor: newFakeExec(false)}
	if _, err := queue.New(queue.Config{RejectRetry: -1}, full); err == nil || !strings.Contains(err.Error(), "RejectRetry") {
		t.Fatalf("negative RejectRetry: %v", err)
	}
	d := full
	d.Executor = nil
	if _, err := queue.New(queue.Config{}, d); err == nil || !strings.Contains(err.Error(), "Executor") {
		t.Fatalf("nil Executor: %v", err)
	}
	q, err := queue.New(queue.Config{}, full)
	if err != nil {
		t.Fatal(err)
	}
	_ = q.Close() // Close without Start
	q.Start()     // no-op after Close
	_ = q.Close()
}

// Close does not wait out DrainTimeout for a task that is only waiting for a
// rate token: it is released unstarted.
func TestCloseReleasesTokenWaiters(t *testing.T) {
	lim := queuetest.DefaultLimits()
	lim.MaxTaskRPS = 0.001
	e := newEnv(t, 1, lim)
	exec := newFakeExec(false)
	cfg := fastCfg()
	cfg.DrainTimeout = time.Hour
	q := e.start(t, cfg, exec, nil)
	tasks := callbacks(2, 1, "tw", "d")
	e.add(t, tasks...)
	testwait.For(t, 10*time.Second, "one delivered, one waiting for a token", func() bool {
		return e.store.Count(queue.StatusSucceeded) == 1 && metric(t, e.reg, "fusebox_queue_scheduler_active_workers", nil) == 1
	})
	closed := make(chan struct{})
	go func() { _ = q.Close(); close(closed) }()
	testwait.For(t, 10*time.Second, "Close to return well before the hour-long drain timeout", func() bool {
		select {
		case <-closed:
			return true
		default:
			return false
		}
	})
	if n, _, _ := exec.stats(); n != 1 {
		t.Fatalf("%d calls, want 1", n)
	}
}
