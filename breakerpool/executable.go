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
// returned (the DestinationDownError itself when Cause is nil). Every other
// outcome, error or not, is a success for the breaker. A panic (or
// runtime.Goexit) in the executable reports a failure and propagates.
func (e *CircuitBreakerExecutable) Execute(ctx context.Context) (err error) {
	done, err := e.Breaker.Allow()
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
			done(false)
		}
	}()
	err = e.Executable.Execute(ctx)
	finished = true
	var down *DestinationDownError
	if errors.As(err, &down) {
		done(false)
		if down.Cause != nil {
			return down.Cause
		}
		return down
	}
	done(true)
	return err
}
