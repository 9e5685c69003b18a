package queue

import (
	"math"
	"math/rand/v2"
	"time"
)

// Retry policies (REFERENCE.md, "Temporal's outbound queue, as built").
const (
	// DownBackoffBase and DownBackoffMax shape the destination-down retry:
	// 1s × 2ⁿ capped at 1h.
	DownBackoffBase = time.Second
	DownBackoffMax  = time.Hour
	// BlockedBackoffBase, BlockedBackoffFactor and BlockedBackoffMax shape
	// the breaker-open reschedule: 3s × 1.5ⁿ capped at 5 min, after at most
	// one immediate resubmit.
	BlockedBackoffBase   = 3 * time.Second
	BlockedBackoffFactor = 1.5
	BlockedBackoffMax    = 5 * time.Minute
	// RescheduleBase, RescheduleFactor and RescheduleMax shape the retry
	// after an unexpected error: 1s × 1.1ⁿ capped at 3 min, Temporal's task
	// reschedule policy (common/util.go CreateTaskReschedulePolicy, used by
	// service/history/queues/executable.go for a task whose processing
	// failed). 70 such errors (history.TaskDLQUnexpectedErrorAttempts) then
	// take about 75 minutes to reach the DLQ, as in Temporal; under the
	// destination-down retry policy they took about 59 hours.
	RescheduleBase   = time.Second
	RescheduleFactor = 1.1
	RescheduleMax    = 3 * time.Minute
	// JitterMin is the low end of the jitter factor range [JitterMin, 1).
	JitterMin = 0.8
)

// jitter maps u ∈ [0, 1) to a factor in [JitterMin, 1). Values outside
// [0, 1) are clamped.
func jitter(u float64) float64 {
	if !(u >= 0) { // also NaN
		u = 0
	}
	// Capped a hair below 1 so that the product with a duration, rounded,
	// stays below it.
	return min(JitterMin+(1-JitterMin)*u, 1-1e-9)
}

// expBackoff returns base × factor^n capped at max, without overflow.
func expBackoff(base time.Duration, factor float64, n int, max time.Duration) time.Duration {
	if n < 0 {
		n = 0
	}
	d := float64(base) * math.Pow(factor, float64(n))
	if d >= float64(max) || math.IsInf(d, 0) || math.IsNaN(d) {
		return max
	}
	return time.Duration(d)
}

// DownBackoff is the delay before the next attempt of a task whose attempt
// number `attempts` (1 for the first) found its destination down, under
// Temporal's default retry policy: 1s × 2^(attempts-1), capped at 1h, times
// a jitter factor in [0.8, 1.0) drawn from u ∈ [0, 1).
func DownBackoff(attempts int, u float64) time.Duration {
	return RetryBackoff(DownBackoffBase, DownBackoffMax, attempts, u)
}

// RescheduleBackoff is the delay before the next attempt of a task whose
// unexpected error number `n` (1 for the first) just happened: base ×
// 1.1^(n-1) (base: RescheduleBase, 1 s), capped at 3 min, times a jitter
// factor in [0.8, 1.0) drawn from u ∈ [0, 1), as Temporal's
// ExponentialRetryPolicy jitters it.
func RescheduleBackoff(base time.Duration, n int, u float64) time.Duration {
	d := expBackoff(base, RescheduleFactor, n-1, RescheduleMax)
	return time.Duration(float64(d) * jitter(u))
}

// RetryBackoff is DownBackoff under a retry policy (initial, maxInterval):
// initial × 2^(attempts-1), capped at maxInterval, times a jitter factor in
// [0.8, 1.0) drawn from u ∈ [0, 1). Non-positive bounds take the defaults.
func RetryBackoff(initial, maxInterval time.Duration, attempts int, u float64) time.Duration {
	if initial <= 0 {
		initial = DownBackoffBase
	}
	if maxInterval <= 0 {
		maxInterval = DownBackoffMax
	}
	d := expBackoff(initial, 2, attempts-1, maxInterval)
	return time.Duration(float64(d) * jitter(u))
}

// RetryLimits are the retry settings a Limits may also carry
// (*dynconfig.Snapshot does); Limits without them get Temporal's defaults.
// They are read at every retry, so a config change applies to the next one.
type RetryLimits interface {
	// RetryPolicy is the first retry delay and its cap for a task group
	// (component.nexusoperations / component.callbacks
	// .retryPolicy.initialInterval and .maxInterval).
	RetryPolicy(taskGroup, namespaceID, destination string) (initial, maxInterval time.Duration)
	// MaxUnexpectedErrors is history.TaskDLQUnexpectedErrorAttempts.
	MaxUnexpectedErrors() int
	// MinRequestTimeout is the least time that must be left before a
	// task's deadline for a call to be made (Nexus: component.
	// nexusoperations.limit.request.timeout.min; 0: no minimum).
	MinRequestTimeout(taskGroup, namespaceID string) time.Duration
}

// retryDelay is the delay before the next attempt of t after its attempt
// number `attempts` failed (destination down or an unexpected error), under
// the retry policy configured now for t's task group and key.
func (q *Queue) retryDelay(t *Task, attempts int) time.Duration {
	initial, maxInterval := DownBackoffBase, DownBackoffMax
	if rl, ok := q.limits.Current().(RetryLimits); ok {
		initial, maxInterval = rl.RetryPolicy(t.TaskGroup, t.NamespaceID, KeyOf(t).Destination)
	}
	return RetryBackoff(initial, maxInterval, attempts, rand.Float64())
}

// maxUnexpected is how many unexpected errors send a task to the DLQ:
// Config.MaxUnexpectedErrors when set, else history.
// TaskDLQUnexpectedErrorAttempts from the live limits (Temporal's 70).
func (q *Queue) maxUnexpected() int {
	if q.cfg.MaxUnexpectedErrors > 0 {
		return q.cfg.MaxUnexpectedErrors
	}
	if rl, ok := q.limits.Current().(RetryLimits); ok {
		if n := rl.MaxUnexpectedErrors(); n > 0 {
			return n
		}
	}
	return DefaultMaxUnexpectedErrors
}

// BlockedBackoff is the delay before a task that the breaker rejected for
// the n-th consecutive time (n ≥ 1) is tried again. The first rejection is
// resubmitted at once (0); later ones wait 3s × 1.5^(n-2), capped at 5 min,
// times a jitter factor in [0.8, 1.0) drawn from u ∈ [0, 1).
func BlockedBackoff(n int, u float64) time.Duration {
	if n <= 1 {
		return 0
	}
	d := expBackoff(BlockedBackoffBase, BlockedBackoffFactor, n-2, BlockedBackoffMax)
	return time.Duration(float64(d) * jitter(u))
}
