package queue_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sony/gobreaker/v2"

	"fusebox/breakerpool"
	"fusebox/dynconfig"
	"fusebox/internal/testwait"
	"fusebox/queue"
	"fusebox/queue/queuetest"
	"fusebox/transport"
	"fusebox/transport/transporttest"
)

// liveConfig is a real dynamic-config collection serving the queue's limits,
// and a way to replace its table as raftstore does.
type liveConfig struct {
	coll    *dynconfig.Collection
	entries map[string]dynconfig.Entry
}

func newLiveConfig(t *testing.T) *liveConfig {
	c := &liveConfig{coll: dynconfig.NewCollection(nil), entries: map[string]dynconfig.Entry{}}
	t.Cleanup(func() { _ = c.coll.Close() })
	return c
}

// set canonicalises and stores one value (as the API and the FSM do).
func (c *liveConfig) set(t *testing.T, key, ns, dest, value string) {
	t.Helper()
	e := dynconfig.Entry{Key: key, Namespace: ns, Destination: dest, Value: json.RawMessage(value)}
	canon, err := dynconfig.Canonical(e)
	if err != nil {
		t.Fatal(err)
	}
	e.Value = canon
	c.entries[key+"\x00"+ns+"\x00"+dest] = e
	all := make([]dynconfig.Entry, 0, len(c.entries))
	for _, e := range c.entries {
		all = append(all, e)
	}
	c.coll.Update(all)
}

func (e *env) startLive(t *testing.T, cfg queue.Config, lc *liveConfig, exec queue.Executor, res queue.Resolver) {
	t.Helper()
	q, err := queue.New(cfg, queue.Deps{
		Store: e.store, Ownership: queuetest.HolderOwnership(e.holder, "a"), Limits: queue.DynamicLimits(lc.coll),
		Breakers: queue.PoolBreakers(e.pool), Executor: exec, Resolver: res, Registerer: e.reg,
	})
	if err != nil {
		t.Fatal(err)
	}
	q.Start()
	t.Cleanup(func() { _ = q.Close() })
}

// A destination that answers 302 forever used to keep its task pending
// forever. With a schedule-to-close deadline the task ends failed with
// "deadline exceeded" at its deadline, even though its backoff (10 s
// initial interval, set live) would put the next attempt far past it.
func TestDeadlineEndsTaskOfRedirectingDestination(t *testing.T) {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		http.Redirect(w, r, "/elsewhere", http.StatusFound)
	}))
	t.Cleanup(srv.Close)
	lc := newLiveConfig(t)
	lc.set(t, dynconfig.KeyCallbackRetryInitialInterval, "", "", `10`) // Temporal's reading: 10 s
	e := newEnv(t, 1, queuetest.DefaultLimits())
	e.startLive(t, fastCfg(), lc, newExecutor(t), nil)

	tk := callback("redirected", 0, "d", srv.URL+"/cb")
	tk.Deadline = time.Now().Add(1500 * time.Millisecond)
	e.add(t, tk)
	testwait.For(t, 8*time.Second, "the task failed at its deadline", func() bool {
		got, _ := e.store.Task(tk.ID)
		return got.Terminal()
	})
	got, _ := e.store.Task(tk.ID)
	if got.Status != queue.StatusFailed || !strings.HasPrefix(got.Message, queue.DeadlineExceeded) || got.HTTPStatus != http.StatusFound {
		t.Fatalf("task = %s %q (HTTP %d); want failed, deadline exceeded, last answer 302", got.Status, got.Message, got.HTTPStatus)
	}
	if got.Attempts != 1 || hits.Load() != 1 {
		t.Fatalf("attempts %d, destination hit %d times; want 1 each (the retry was due only at the deadline)", got.Attempts, hits.Load())
	}
	res := e.store.Results(tk.ID)
	if len(res) != 2 || res[0].Status != queue.StatusPending || res[0].NextAttemptAt.Sub(tk.Deadline) < 5*time.Second {
		t.Fatalf("results %+v; want a pending retry scheduled ~10 s out, then the failure", res)
	}
}

// The retry policy is read per task group and destination at every retry:
// a destination that is down is retried 50 ms apart under its own setting
// while another destination keeps Temporal's 1 s × 2ⁿ; a live change to 1 h
// applies to the next retry.
func TestRetryPolicyFromDynamicConfigLive(t *testing.T) {
	downExec := newFakeExec(false)
	downExec.answer = func(transport.Request) (transport.Result, error) {
		return transport.Result{Outcome: transport.OutcomeDown, Status: 503, Message: "unavailable"},
			breakerpool.NewDestinationDownError("HTTP 503", errors.New("unavailable"))
	}
	lc := newLiveConfig(t)
	fast := "http://fast.example:81"
	lc.set(t, dynconfig.KeyCallbackRetryInitialInterval, "ns", fast, `"0.05"`)
	lc.set(t, dynconfig.KeyCallbackRetryMaxInterval, "", fast, `0.1`)
	lc.set(t, dynconfig.KeyNexusRetryInitialInterval, "", "", `"1h"`) // another task group: no effect on callbacks
	e := newEnv(t, 1, queuetest.DefaultLimits())
	e.startLive(t, fastCfg(), lc, downExec, nil)
	f := callback("fast", 0, fast, fast+"/cb")
	s := callback("slow", 0, "http://slow.example:82", "http://slow.example:82/cb")
	e.add(t, f, s)
	testwait.For(t, 5*time.Second, "four quick attempts", func() bool {
		got, _ := e.store.Task(f.ID)
		return got.Attempts >= 4
	})
	if got, _ := e.store.Task(s.ID); got.Attempts > 2 {
		t.Fatalf("the other destination was retried %d times; want Temporal's 1 s × 2ⁿ", got.Attempts)
	}
	for i, r := range e.store.Results(f.ID)[:3] {
		if r.NextAttemptAt.IsZero() {
			t.Fatalf("result %d has no next attempt", i)
		}
	}
	lc.set(t, dynconfig.KeyCallbackRetryInitialInterval, "ns", fast, `"1h"`)
	lc.set(t, dynconfig.KeyCallbackRetryMaxInterval, "", fast, `"2h"`)
	n := len(e.store.Results(f.ID))
	testwait.For(t, 5*time.Second, "a retry under the new policy", func() bool {
		rs := e.store.Results(f.ID)
		if len(rs) <= n {
			return false
		}
		last := rs[len(rs)-1]
		return last.Status == queue.StatusPending && time.Until(last.NextAttemptAt) > 40*time.Minute
	})
}

// history.TaskDLQUnexpectedErrorAttempts decides when unexpected errors
// dead-letter a task, live: past the 5 that were hard-coded the task is
// still pending under Temporal's 70; set to 8, it goes to the DLQ at 8.
// (The reschedule's 1 s is shortened here: Config.RescheduleBase.)
func TestDLQAttemptsFromDynamicConfig(t *testing.T) {
	lc := newLiveConfig(t)
	e := newEnv(t, 1, queuetest.DefaultLimits())
	cfg := fastCfg()
	cfg.RescheduleBase = 10 * time.Millisecond
	e.startLive(t, cfg, lc, newFakeExec(false), mapResolver{"flaky": "error: registry not ready"})
	tk := nexusStart("flaky", "flaky")
	e.add(t, tk)
	testwait.For(t, 5*time.Second, "six unexpected errors", func() bool {
		got, _ := e.store.Task(tk.ID)
		return got.Unexpected >= 6
	})
	if got, _ := e.store.Task(tk.ID); got.Status != queue.StatusPending {
		t.Fatalf("after %d unexpected errors the task is %s; want pending (Temporal's default is 70)", got.Unexpected, got.Status)
	}
	lc.set(t, dynconfig.KeyTaskDLQUnexpectedErrorAttempts, "", "", `8`)
	testwait.For(t, 5*time.Second, "dead-lettered", func() bool {
		got, _ := e.store.Task(tk.ID)
		return got.Status == queue.StatusDLQ
	})
	if got, _ := e.store.Task(tk.ID); got.Unexpected < 8 || !strings.Contains(got.Message, "too many unexpected errors") {
		t.Fatalf("task = %+v", got)
	}
}

// A Nexus call is bounded by its task's deadline, and not made at all when
// less than component.nexusoperations.limit.request.timeout.min is left.
func TestDeadlineBoundsNexusRequestTimeout(t *testing.T) {
	exec := newFakeExec(false)
	lc := newLiveConfig(t)
	lc.set(t, dynconfig.KeyNexusRequestTimeout, "", "", `"1m"`)
	e := newEnv(t, 1, queuetest.DefaultLimits())
	e.startLive(t, fastCfg(), lc, exec, mapResolver{"ep": "http://127.0.0.1:9/nexus"})
	bounded := nexusStart("bounded", "ep")
	bounded.Deadline = time.Now().Add(20 * time.Second)
	tooClose := nexusStart("too-close", "ep")
	tooClose.Deadline = time.Now().Add(time.Second) // < 1.5 s, Temporal's minimum
	e.add(t, bounded, tooClose)
	testwait.For(t, 5*time.Second, "both terminal", func() bool {
		return e.allStatus([]queue.Task{tooClose}, queue.StatusFailed) && e.allStatus([]queue.Task{bounded}, queue.StatusSucceeded)
	})
	if n, _, _ := exec.stats(); n != 1 {
		t.Fatalf("executor called %d times; want once (not for the task too close to its deadline)", n)
	}
	exec.mu.Lock()
	req := exec.calls[0].req
	exec.mu.Unlock()
	if req.RequestID != "bounded" || req.Timeout > 20*time.Second || req.Timeout < 15*time.Second {
		t.Fatalf("request %s timeout %v; want ≤ the 20 s left, not the 1 m configured", req.RequestID, req.Timeout)
	}
	if got, _ := e.store.Task(tooClose.ID); !strings.Contains(got.Message, "less than the minimum request timeout 1.5s") {
		t.Fatalf("message %q", got.Message)
	}
}

// The deadline is checked again once the rate limiter gives a task its
// token, right before the call, as Temporal checks it right before its
// call (components/nexusoperations/executors.go executeInvocationTask).
// Checked only before the wait, a task that waited for its token was
// called with less than the minimum request timeout left, or past its
// deadline. At 0.5 calls/s three starts due at once with 3 s left: the
// first is called, the second's token comes with ~1 s left (< 1.5 s) and
// the third's after the deadline. Neither is called, both fail deadline
// exceeded with no attempt counted, and the breaker gets no verdict.
func TestDeadlineCheckedAgainAfterRateWait(t *testing.T) {
	dest := transporttest.NewDestination(t)
	lc := newLiveConfig(t)
	lc.set(t, dynconfig.KeyHostSchedulerMaxTaskRPS, "", "ep", `0.5`)
	e := newEnv(t, 1, queuetest.DefaultLimits())
	e.startLive(t, fastCfg(), lc, newExecutor(t), mapResolver{"ep": dest.NexusURL()})
	deadline := time.Now().Add(3 * time.Second)
	var tasks []queue.Task
	for _, id := range []string{"s-1", "s-2", "s-3"} {
		tk := nexusStart(id, "ep")
		tk.Request = stored(transport.Request{Service: transporttest.Service, Operation: transporttest.OpEcho, Input: []byte(`{}`)})
		tk.Deadline = deadline
		tasks = append(tasks, tk)
	}
	e.add(t, tasks...)
	testwait.For(t, 10*time.Second, "every start ended", func() bool {
		for _, tk := range tasks {
			if got, _ := e.store.Task(tk.ID); !got.Terminal() {
				return false
			}
		}
		return true
	})
	calls := dest.Calls()
	for _, c := range calls {
		if left := deadline.Sub(c.At); left < 1400*time.Millisecond {
			t.Errorf("start %s called with %v left before its deadline; want none under the 1.5 s minimum", c.RequestID, left.Round(time.Millisecond))
		}
	}
	late := 0
	for _, tk := range tasks {
		got, _ := e.store.Task(tk.ID)
		if got.Status == queue.StatusFailed {
			late++
			if !strings.HasPrefix(got.Message, queue.DeadlineExceeded) || got.Attempts != 0 {
				t.Errorf("%s: %q after %d attempts; want deadline exceeded, no attempt", tk.ID, got.Message, got.Attempts)
			}
		}
	}
	if len(calls) != 1 || late != 2 {
		t.Fatalf("%d starts called, %d failed at the deadline; want 1 and 2", len(calls), late)
	}
	k := breakerpool.Key{TaskGroup: breakerpool.TaskGroupNexusInvocation, NamespaceID: "ns", Destination: "ep"}
	verdicts := metric(t, e.reg, "fusebox_breaker_requests_total", map[string]string{"task_group": k.TaskGroup, "destination": k.Destination, "outcome": "success"})
	if verdicts != 1 || e.pool.Get(k).State() != gobreaker.StateClosed {
		t.Fatalf("breaker saw %v successes (state %v); want 1, the call made", verdicts, e.pool.Get(k).State())
	}
}
