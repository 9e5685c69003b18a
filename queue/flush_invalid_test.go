package queue_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"fusebox/internal/testwait"
	"fusebox/queue"
	"fusebox/queue/queuetest"
	"fusebox/raftstore/state"
	"fusebox/transport"
	"fusebox/transport/transporttest"
)

// One result the store refuses for what it holds does not hold up the
// shard's other results: the batch is written a result at a time, and the
// refused result is written without its output (here: refused while its
// message lacks the refusal note). Before, the whole batch was put back and
// retried forever, and none of the shard's results were written again.
func TestInvalidResultDoesNotBlockShard(t *testing.T) {
	dest := transporttest.NewDestination(t)
	e := newEnv(t, 1, queuetest.DefaultLimits())
	e.store.ValidateResults(func(r queue.Result) error {
		if r.TaskID == "poison" && !strings.HasPrefix(r.Message, "result refused by the task store") {
			return fmt.Errorf("%w: results[0].output: too large", state.ErrInvalidArgument)
		}
		return nil
	})
	e.start(t, fastCfg(), newExecutor(t), nil)
	tasks := []queue.Task{callback("poison", 0, "receiver", dest.CallbackURL())}
	for i := range 50 {
		tasks = append(tasks, callback(fmt.Sprint("ok-", i), 0, "receiver", dest.CallbackURL()))
	}
	e.add(t, tasks...)
	testwait.For(t, 20*time.Second, "every task written succeeded", func() bool {
		for _, tk := range tasks {
			if got, _ := e.store.Task(tk.ID); got.Status != queue.StatusSucceeded {
				return false
			}
		}
		return true
	})
	if got, _ := e.store.Task("poison"); !strings.Contains(got.Message, "output dropped") {
		t.Errorf("the refused result was written with message %q, want the refusal noted", got.Message)
	}
}

// A result the store refuses for its operation id (longer than the store
// keeps) is written again without it, so the task ends instead of staying
// pending: withoutOutput kept the operation id, the store refused the
// second write too, the result was dropped and the task — still pending —
// was called again at the full rate, no attempt counted, no backoff.
func TestRefusedOperationIDIsDroppedNotCalledAgain(t *testing.T) {
	dest := transporttest.NewDestination(t)
	e := newEnv(t, 1, queuetest.DefaultLimits())
	e.store.ValidateResults(func(r queue.Result) error {
		if r.OperationID != "" { // a store whose operation_id bound the token exceeds
			return fmt.Errorf("%w: results[0].operation_id: longer than the store keeps", state.ErrInvalidArgument)
		}
		return nil
	})
	e.start(t, fastCfg(), newExecutor(t), mapResolver{"ep": dest.NexusURL()})
	tk := nexusStart("async", "ep")
	tk.Request = stored(transport.Request{Service: transporttest.Service, Operation: transporttest.OpAsync})
	e.add(t, tk)
	testwait.For(t, 10*time.Second, "the start's result written", func() bool {
		got, _ := e.store.Task(tk.ID)
		return got.Terminal()
	})
	got, _ := e.store.Task(tk.ID)
	if got.Status != queue.StatusSucceeded || got.OperationID != "" || got.Attempts != 1 ||
		!strings.HasPrefix(got.Message, "result refused by the task store") || !strings.Contains(got.Message, "operation_id dropped") {
		t.Fatalf("task = %s, operation id %q, %d attempts, message %q; want succeeded without the refused operation id, the refusal noted",
			got.Status, got.OperationID, got.Attempts, got.Message)
	}
	if n := dest.Count(transporttest.KindStart); n != 1 {
		t.Fatalf("destination saw %d starts, want 1", n)
	}
}
