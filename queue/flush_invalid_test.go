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
