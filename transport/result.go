package transport

import (
	"encoding/json"
	"errors"
	"fmt"
)

// Outcome is what one attempt achieved.
type Outcome int

// Outcomes of Execute. Only OutcomeDown comes with a *breakerpool.DestinationDownError.
const (
	// OutcomeUnknown is the zero value; Execute never returns it.
	OutcomeUnknown Outcome = iota
	// OutcomeSucceeded: a sync start returned its output, a cancel or a
	// callback was accepted (2xx).
	OutcomeSucceeded
	// OutcomeStarted: the handler started an async operation (OperationID set).
	OutcomeStarted
	// OutcomeFailed: a non-retryable answer; the task ends failed with Message.
	OutcomeFailed
	// OutcomeDown: the destination is unhealthy; retry with backoff, the
	// breaker counts a failure.
	OutcomeDown
	// OutcomeAborted: the caller's context ended (or the executor is closed)
	// before the destination answered; it says nothing about the destination.
	OutcomeAborted
)

var outcomeNames = [...]string{"unknown", "succeeded", "started", "failed", "down", "aborted"}

func (o Outcome) String() string {
	if o >= 0 && int(o) < len(outcomeNames) {
		return outcomeNames[o]
	}
	return fmt.Sprintf("outcome(%d)", int(o))
}

// Result describes one attempt.
type Result struct {
	// Status is the HTTP status of the destination's response, 0 when there
	// was none (transport error, timeout before headers, invalid request).
	Status int
	// Outcome classifies the attempt.
	Outcome Outcome
	// OperationID is the token of an async operation (OutcomeStarted).
	OperationID string
	// Output is a sync start's result. It is always valid JSON when set: a
	// JSON response verbatim; any other content JSON-encoded as a string
	// (base64 for bytes), with OutputContentType recording the original type.
	Output            json.RawMessage
	OutputContentType string
	// Message is the destination's answer (or what went wrong), recorded on
	// the task when it fails or is retried. Never contains request bodies.
	Message string
}

// FailedError is the error of an OutcomeFailed attempt: the destination gave
// an answer that retrying cannot change (400, 401, 403, 404, 409, 501, an
// operation failure, an invalid response), or the request itself is invalid.
// It is deliberately not a DestinationDownError, so the breaker sees success.
type FailedError struct {
	Status  int    // HTTP status, 0 if none
	Message string // the destination's answer
	Err     error  // underlying cause, if any
}

func (e *FailedError) Error() string {
	if e.Status == 0 {
		return "outbound request failed: " + e.Message
	}
	return fmt.Sprintf("outbound request failed (HTTP %d): %s", e.Status, e.Message)
}

func (e *FailedError) Unwrap() error { return e.Err }

// StatusError is the cause inside a DestinationDownError or FailedError
// produced from an HTTP status.
type StatusError struct {
	Status int
	// Retryable is the nexus-request-retryable header ("true", "false" or "").
	Retryable string
	Message   string
}

func (e *StatusError) Error() string {
	return e.Message
}

// ErrResponseTooLarge is the cause when a response body exceeds
// Options.MaxResponseBytes.
var ErrResponseTooLarge = errors.New("response body too large")

// ErrClosed is returned by Execute after Close.
var ErrClosed = errors.New("outbound executor closed")
