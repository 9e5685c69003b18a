package queue_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/sony/gobreaker/v2"

	"fusebox/breakerpool"
	"fusebox/internal/testwait"
	"fusebox/queue"
	"fusebox/queue/queuetest"
	"fusebox/transport"
	"fusebox/transport/transporttest"
)

func newExecutor(t testing.TB) *transport.Executor {
	t.Helper()
	x, err := transport.New(transport.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = x.Close() })
	return x
}

// Delivery through the whole pipeline to real Nexus handlers and callback
// receivers.
func TestDeliveryToRealDestinations(t *testing.T) {
	dest := transporttest.NewDestination(t)
	e := newEnv(t, 2, queuetest.DefaultLimits())
	e.start(t, fastCfg(), newExecutor(t), mapResolver{"ep": dest.NexusURL()})

	start := func(id, op string, shard int, callbackURL string) queue.Task {
		tk := nexusStart(id, "ep")
		tk.Shard = shard
		tk.Request = stored(transport.Request{Service: transporttest.Service, Operation: op,
			Input: json.RawMessage(`{"hello":"` + id + `"}`), CallbackURL: callbackURL})
		return tk
	}
	echo, fail := start("echo-1", transporttest.OpEcho, 0, ""), start("fail-1", transporttest.OpFail, 0, "")
	async := start("async-1", transporttest.OpAsync, 1, dest.CallbackURL())
	cancel := queue.Task{ID: "cancel-1", Shard: 1, NamespaceID: "ns", TaskGroup: breakerpool.TaskGroupNexusCancelation, Destination: "ep",
		Request: stored(transport.Request{Service: transporttest.Service, Operation: transporttest.OpAsync, OperationID: "op-async-1"})}
	cb := callback("cb-1", 0, "receiver", dest.CallbackURL())
	cb.Request = stored(transport.Request{URL: dest.CallbackURL(), Completion: &transport.Completion{
		State: transport.CompletionSucceeded, Result: json.RawMessage(`{"done":true}`), OperationToken: "op-async-1"}})
	raw := callback("cb-raw", 1, "receiver", dest.CallbackURL())
	e.add(t, echo, async, fail, cancel, cb, raw)

	testwait.For(t, 15*time.Second, "every task terminal", func() bool {
		for _, id := range []string{"echo-1", "async-1", "fail-1", "cancel-1", "cb-1", "cb-raw"} {
			if got, _ := e.store.Task(id); !got.Terminal() {
				return false
			}
		}
		return true
	})
	check := func(id string, st string, httpStatus int) queue.Task {
		t.Helper()
		got, _ := e.store.Task(id)
		if got.Status != st || got.HTTPStatus != httpStatus || got.Attempts != 1 {
			t.Fatalf("%s: status %s HTTP %d attempts %d (message %q); want %s HTTP %d after 1 attempt",
				id, got.Status, got.HTTPStatus, got.Attempts, got.Message, st, httpStatus)
		}
		return got
	}
	if got := check("echo-1", queue.StatusSucceeded, 200); string(got.Output) != `{"hello":"echo-1"}` {
		t.Fatalf("echo output %s", got.Output)
	}
	if got := check("async-1", queue.StatusSucceeded, 201); got.OperationID != "op-async-1" {
		t.Fatalf("async operation id %q", got.OperationID)
	}
	check("fail-1", queue.StatusFailed, 424)
	check("cancel-1", queue.StatusSucceeded, 202)
	check("cb-1", queue.StatusSucceeded, 200)
	check("cb-raw", queue.StatusSucceeded, 200)
	if calls := dest.CallsWithRequestID("echo-1"); len(calls) != 1 || calls[0].Kind != transporttest.KindStart {
		t.Fatalf("destination saw %+v for echo-1; want one start carrying the task id as request id", calls)
	}
	if n := dest.Count(transporttest.KindCallback); n != 2 {
		t.Fatalf("callback receiver saw %d callbacks, want 2", n)
	}
}

// A destination switched down trips its breaker (its tasks back off and are
// rescheduled gently, never dead-lettered) while a healthy destination on
// the same node keeps flowing.
func TestDownDestinationTripsBreakerHealthyFlows(t *testing.T) {
	dead, healthy := transporttest.NewDestination(t), transporttest.NewDestination(t)
	if err := dead.SetMode(transporttest.ModeUnavailable); err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, 4, queuetest.DefaultLimits())
	lim := queuetest.DefaultLimits()
	lim.Concurrency = 2 // so that the trip (6th failure) lands before every task has called
	e.limits.SetDestination("dead", lim)
	e.start(t, fastCfg(), newExecutor(t), nil)
	var deadTasks, okTasks []queue.Task
	for i := range 30 {
		deadTasks = append(deadTasks, callback(fmt.Sprintf("dead-%02d", i), i%4, "dead", dead.CallbackURL()))
		okTasks = append(okTasks, callback(fmt.Sprintf("ok-%02d", i), i%4, "healthy", healthy.CallbackURL()))
	}
	e.add(t, append(deadTasks, okTasks...)...)

	testwait.For(t, 15*time.Second, "healthy delivered and dead tasks rescheduled", func() bool {
		if !e.allStatus(okTasks, queue.StatusSucceeded) {
			return false
		}
		for _, tk := range deadTasks {
			got, _ := e.store.Task(tk.ID)
			if got.Status != queue.StatusPending || (got.Attempts == 0 && got.Blocked == 0) {
				return false
			}
		}
		return true
	})
	if st := e.pool.Get(key("dead")).State(); st != gobreaker.StateOpen {
		t.Fatalf("dead destination's breaker is %v, want open", st)
	}
	if st := e.pool.Get(key("healthy")).State(); st != gobreaker.StateClosed {
		t.Fatalf("healthy destination's breaker is %v", st)
	}
	attempts, blocked := 0, 0
	for _, tk := range deadTasks {
		got, _ := e.store.Task(tk.ID)
		attempts += got.Attempts
		if got.Blocked > 0 {
			blocked++
		}
	}
	if got := dead.Count(transporttest.KindCallback); got != attempts || attempts > 6+2 || blocked == 0 {
		t.Fatalf("dead destination got %d calls, tasks record %d attempts and %d blocked: the breaker did not stop the calls", got, attempts, blocked)
	}
	if n := e.store.Count(queue.StatusDLQ); n != 0 {
		t.Fatalf("%d tasks dead-lettered because a destination was down", n)
	}
}
