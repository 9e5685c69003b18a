package queue

import (
	"fmt"
	"time"

	"fusebox/transport"
)

// DeadlineExceeded begins the message of a task failed at its deadline.
const DeadlineExceeded = "deadline exceeded"

// pastDeadline ends a task whose schedule-to-close deadline has passed, or
// is too close for a call to be worth making: the time left is below the
// task group's minimum request timeout (Temporal's component.
// nexusoperations.limit.request.timeout.min) while the deadline, not the
// request timeout, bounds the call. Otherwise it bounds req.Timeout by the
// time left, so no call outlives its task's deadline. process calls it
// before the rate gate, and call.Execute again right before the call,
// once the rate token is there: Temporal checks right before its call
// (components/nexusoperations/executors.go executeInvocationTask), and the
// wait for a token can outlast the time left. req.Timeout only ever comes
// down to a time left, so the second call cuts it again correctly.
//
// The deadline is an absolute time in the task, fixed at submit, so every
// replica agrees on it; the owner's clock only decides when to look, and
// the failure is written through the normal completion path. Retries are
// never scheduled past the deadline (Result.Apply and raftstore's complete
// clamp NextAttemptAt to it), so a task comes due at its deadline at the
// latest, whatever its backoff.
func (q *Queue) pastDeadline(t *Task, req *transport.Request) (Result, bool) {
	if t.Deadline.IsZero() {
		return Result{}, false
	}
	left := time.Until(t.Deadline)
	var minLeft time.Duration
	if left > 0 && left < req.Timeout {
		if rl, ok := q.limits.Current().(RetryLimits); ok {
			minLeft = rl.MinRequestTimeout(t.TaskGroup, t.NamespaceID)
		}
		if left >= minLeft {
			req.Timeout = left
			return Result{}, false
		}
	} else if left > 0 {
		return Result{}, false
	}
	msg := fmt.Sprintf("%s: schedule-to-close deadline %s passed after %d attempts", DeadlineExceeded,
		t.Deadline.UTC().Format(time.RFC3339Nano), t.Attempts)
	if left > 0 {
		msg = fmt.Sprintf("%s: %v left before the schedule-to-close deadline, less than the minimum request timeout %v, after %d attempts",
			DeadlineExceeded, left.Round(time.Millisecond), minLeft, t.Attempts)
	}
	if t.Message != "" {
		msg += "; last: " + t.Message
	}
	return q.terminal(t, StatusFailed, t.Attempts, msg, t.HTTPStatus), true
}
