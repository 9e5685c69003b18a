package breakerpool

import (
	"context"
	"errors"
)

// Executable is the unit of work a CircuitBreakerExecutable guards.
type Executable interface {
	Execute(ctx context.Context) error
}

// ExecutableFunc adapts a function to Executable.
type ExecutableFunc func(ctx context.Context) error

// Execute calls f.
func (f ExecutableFunc) Execute(ctx context.Context) error { return f(ctx) }

// blockedRecorder is implemented by *Breaker to count executable rejections
// in fusebox_circuit_breaker_executable_blocked_total.
type blockedRecorder interface{ recordBlocked() }

func (b *Breaker) recordBlocked() { b.blocked.Add(1) }

// CircuitBreakerExecutable runs Executable through Breaker, as Temporal's
// outbound queue does.
type CircuitBreakerExecutable struct {
	Breaker    TwoStepCircuitBreaker
	Executable Executable
}

// NewCircuitBreakerExecutable wraps exec with cb.
func NewCircuitBreakerExecutable(cb TwoStepCircuitBreaker, exec Executable) *CircuitBreakerExecutable {
	return &CircuitBreakerExecutable{Breaker: cb, Executable: exec}
}

// Execute asks the breaker first. A rejection does not run the executable
// and returns a *ResourceExhaustedError with cause CIRCUIT_BREAKER_OPEN (so
// the task is retried gently and never dead-lettered). Only a
// DestinationDownError counts as a failure; it is unwrapped, and its Cause
// returned (the DestinationDownError itself when Cause is nil). A call
// abandoned because ctx was cancelled, or given up with ErrNoVerdict, gives
// its permit back without a verdict (with a *Breaker; other breakers see a
// success, as Temporal's do). Every other outcome, error or not, is a success for the breaker. A
// panic (or runtime.Goexit) in the executable reports a failure and
// propagates. A DestinationDownError with a RetryAfter deadline first opens
// a *Breaker until then (OpenRetryAfter, capped by Settings.MaxRetryAfter).
func (e *CircuitBreakerExecutable) Execute(ctx context.Context) (err error) {
	done, err := e.allow()
	if err != nil {
		if r, ok := e.Breaker.(blockedRecorder); ok {
			r.recordBlocked()
		}
		if errors.Is(err, ErrCircuitBreakerOpen) {
			return err
		}
		return &ResourceExhaustedError{Cause: CauseCircuitBreakerOpen, Message: "circuit breaker rejection", Err: err}
	}
	finished := false
	defer func() {
		if !finished {
			done(VerdictFailure)
		}
	}()
	err = e.Executable.Execute(ctx)
	finished = true
	if err == nil {
		done(VerdictSuccess)
		return nil
	}
	var down *DestinationDownError // declared here: a success does not allocate it
	switch {
	case errors.As(err, &down):
		if !down.RetryAfter.IsZero() {
			// Open first: the failure reported next then lands on an open
			// gate (a stale probe epoch, or counts of an instance replaced
			// at the close) and cannot trip the breaker for its own Timeout.
			if rb, ok := e.Breaker.(retryAfterBreaker); ok {
				rb.OpenRetryAfter(down.RetryAfter, SourceLocal)
			}
		}
		done(VerdictFailure)
		if down.Cause != nil {
			return down.Cause
		}
		return down
	case errors.Is(err, ErrNoVerdict), errors.Is(err, context.Canceled) && ctx.Err() != nil:
		done(VerdictNone)
	default:
		done(VerdictSuccess)
	}
	return err
}

// verdictBreaker is a breaker that can take a call back without a verdict.
type verdictBreaker interface {
	AllowVerdict() (func(Verdict), error)
}

func (e *CircuitBreakerExecutable) allow() (func(Verdict), error) {
	if vb, ok := e.Breaker.(verdictBreaker); ok {
		return vb.AllowVerdict()
	}
	done, err := e.Breaker.Allow()
	if err != nil {
		return nil, err
	}
	return func(v Verdict) { done(v != VerdictFailure) }, nil
}
