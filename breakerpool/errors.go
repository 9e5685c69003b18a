package breakerpool

import (
	"errors"
	"fmt"
	"time"
)

// CauseCircuitBreakerOpen is the ResourceExhausted cause of a breaker rejection,
// named as Temporal's RESOURCE_EXHAUSTED_CAUSE_CIRCUIT_BREAKER_OPEN.
const CauseCircuitBreakerOpen = "CIRCUIT_BREAKER_OPEN"

// DestinationDownError is the only error an executor returns to say "the
// destination is unhealthy" (transport error, timeout, 408/429/5xx...). It is the
// only outcome a breaker counts as a failure. CircuitBreakerExecutable unwraps it
// before returning, so callers see the underlying cause.
type DestinationDownError struct {
	Message string
	Cause   error
	// RetryAfter is the instant the destination asked to be left alone
	// until (a 429 or 503 answer's Retry-After header, wall clock); zero
	// when it gave none. CircuitBreakerExecutable opens the breaker until
	// then (Breaker.OpenRetryAfter, capped by Settings.MaxRetryAfter).
	RetryAfter time.Time
}

// NewDestinationDownError wraps cause; msg says what was observed.
func NewDestinationDownError(msg string, cause error) *DestinationDownError {
	return &DestinationDownError{Message: msg, Cause: cause}
}

func (e *DestinationDownError) Error() string {
	switch {
	case e.Cause == nil:
		return "destination down: " + e.Message
	case e.Message == "":
		return "destination down: " + e.Cause.Error()
	default:
		return fmt.Sprintf("destination down: %s: %v", e.Message, e.Cause)
	}
}

func (e *DestinationDownError) Unwrap() error { return e.Cause }

// RetryAfterOf returns the Retry-After deadline carried by a
// DestinationDownError in err's chain, zero if none.
func RetryAfterOf(err error) time.Time {
	var d *DestinationDownError
	if errors.As(err, &d) {
		return d.RetryAfter
	}
	return time.Time{}
}

// ResourceExhaustedError tells the caller to retry later, gently, and never to
// dead-letter the task. Cause is a machine-readable reason such as
// CauseCircuitBreakerOpen; Err is the underlying reason (gobreaker's
// ErrOpenState or ErrTooManyRequests, or a fusebox gate error).
type ResourceExhaustedError struct {
	Cause   string
	Message string
	Err     error
}

// ErrCircuitBreakerOpen matches, with errors.Is, every breaker rejection however
// deeply it is wrapped.
var ErrCircuitBreakerOpen = &ResourceExhaustedError{Cause: CauseCircuitBreakerOpen, Message: "circuit breaker rejection"}

func (e *ResourceExhaustedError) Error() string {
	s := "resource exhausted (" + e.Cause + ")"
	if e.Message != "" {
		s += ": " + e.Message
	}
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

func (e *ResourceExhaustedError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrCircuitBreakerOpen) true for any
// ResourceExhaustedError with the same cause.
func (e *ResourceExhaustedError) Is(target error) bool {
	var t *ResourceExhaustedError
	if !errors.As(target, &t) {
		return false
	}
	return t.Cause == e.Cause
}

// ErrNoVerdict, returned (or wrapped) by an executable, says the call was
// given up before it told anything about the destination: the breaker gets
// its permit back and counts nothing (VerdictNone).
var ErrNoVerdict = errors.New("call given up without a verdict")

// IsCircuitBreakerOpen reports whether err is, or wraps, a breaker rejection.
func IsCircuitBreakerOpen(err error) bool { return errors.Is(err, ErrCircuitBreakerOpen) }

// IsDestinationDown reports whether err is, or wraps, a DestinationDownError.
func IsDestinationDown(err error) bool {
	var d *DestinationDownError
	return errors.As(err, &d)
}
