package transport

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net"
	"net/http"
	"strings"
	"time"
	"unicode"

	"github.com/nexus-rpc/sdk-go/nexus"

	"fusebox/breakerpool"
)

// headerRetryable is the Nexus response header that overrides the status
// table either way.
const headerRetryable = "Nexus-Request-Retryable"

// statusOperationFailed is the Nexus "operation failed or canceled" status.
const statusOperationFailed = http.StatusFailedDependency

// maxMessage bounds Result.Message.
const maxMessage = 1 << 10

// MaxAnswerBytes bounds how much of a destination's own words (its body, a
// Nexus failure message) an attempt records in Result.Message, hence in a
// task's last_answer: an answer is evidence for an operator, not a channel
// for reading whatever a URL serves.
const MaxAnswerBytes = 512

// IsDownStatus reports whether an HTTP status means "destination down" for
// a task group's call, before any Nexus-Request-Retryable override: 408,
// 429, 5xx except 501, and every status not listed as an answer. 2xx, 400,
// 401, 403, 404, 409 and 501 are answers (not down), and so is 424 — the
// operation failed or was canceled — to a start only. To a cancel or a
// callback 424 means nothing: Temporal's clients see an unexpected
// response there (nexusrpc handle.go Cancel; callbacks'
// nexus_invocation.go isRetryableCallError), retried and counted
// destination-down. The table is Temporal's (see DESIGN.md).
func IsDownStatus(taskGroup string, status int) bool {
	switch {
	case status >= 200 && status < 300:
		return false
	}
	switch status {
	case http.StatusBadRequest, http.StatusUnauthorized, http.StatusForbidden,
		http.StatusNotFound, http.StatusConflict, http.StatusNotImplemented:
		return false
	case statusOperationFailed:
		return taskGroup != breakerpool.TaskGroupNexusInvocation
	default:
		// 408, 429, 500, 502, 503, 504, 520 and anything unlisted (3xx, 418…).
		return true
	}
}

// classify turns a failed attempt of a taskGroup call into its Result and
// error. ctx is the caller's context (not the one bounded by the request
// timeout).
func classify(ctx context.Context, taskGroup string, timeout time.Duration, c *capture, err error) (Result, error) {
	res := Result{Status: c.status}
	if ctx.Err() != nil {
		cause := context.Cause(ctx)
		res.Outcome = OutcomeAborted
		res.Message = clip("aborted before the destination answered: " + cause.Error())
		return res, fmt.Errorf("%w: %w", errAborted, cause)
	}
	if !c.sent {
		// Nothing reached the wire: the request could not be built.
		return failed(res, "invalid request: "+err.Error(), err)
	}
	var blocked *DestinationError
	if !c.responded && errors.As(err, &blocked) {
		// fusebox refused the address itself (a member's): no call was
		// made, the destination is not down, and retrying cannot help.
		return failed(res, "transport error: "+ConnBlocked+": "+blocked.Reason, err)
	}
	if !c.responded && isLocalResource(err) {
		// This node is short of descriptors, ports or buffers: no verdict
		// for the breaker (the destination was never reached), and the task
		// is retried as an unexpected error, Temporal's path for a task
		// whose processing failed.
		res.Message = "transport error: " + ConnLocal + ": this node is out of file descriptors, local ports or socket buffers"
		return res, fmt.Errorf("%s: %w (%w)", res.Message, breakerpool.ErrNoVerdict, err)
	}
	if !c.responded || (c.bodyErr != nil && !c.tooLarge) {
		// No answer, or an answer cut off mid-body: unhealthy, whatever the status.
		// The message is a class, never the raw error: a dial error names
		// internal addresses and ports, which a caller must not learn.
		var msg string
		switch {
		case isTimeout(err) || isTimeout(c.bodyErr):
			msg = fmt.Sprintf("transport error: %s: no complete response within %s", ConnTimeout, timeout)
		case c.responded:
			msg = fmt.Sprintf("HTTP %d: reading response body: %s", c.status, ConnClass(errors.Join(c.bodyErr, err)))
		default:
			msg = "transport error: " + ConnClass(err)
		}
		res.Outcome = OutcomeDown
		res.Message = clip(msg)
		return res, breakerpool.NewDestinationDownError(res.Message, err)
	}

	status := c.status
	retryable := strings.ToLower(c.header.Get(headerRetryable))
	isDown := IsDownStatus(taskGroup, status)
	// The header is a handler error's retry behaviour, and only a status
	// Temporal's client maps to a handler error type carries one
	// (common/nexus/nexusrpc/client.go httpStatusCodeToHandlerErrorType,
	// the table of handlerErrorType). Any other — a 2xx, a 424 (the
	// operation's own terminal state), 3xx, 418, 502, 504… — is an answer
	// or an unexpected response, whose class no header changes: Temporal
	// retries an unexpected response as destination-down whatever it says
	// (executors.go isDestinationDown, nexus_invocation.go
	// isRetryableCallError).
	if handlerErrorType(status) != "" {
		switch retryable {
		case "true":
			isDown = true
		case "false":
			isDown = false
		}
	}
	msg := describe(status, c, err)
	if isDown {
		// A 429 or 503 with a valid Retry-After carries its deadline to the
		// breaker; without one it is classified exactly as before.
		return down(res, msg, &StatusError{Status: status, Retryable: retryable, Message: msg},
			retryAfterFor(status, c.header, time.Now()))
	}
	return failed(res, msg, err)
}

func down(res Result, msg string, cause *StatusError, retryAfter time.Time) (Result, error) {
	res.Outcome = OutcomeDown
	res.Message = clip(msg)
	cause.Message = res.Message
	d := breakerpool.NewDestinationDownError("", cause)
	d.RetryAfter = retryAfter
	return res, d
}

func failed(res Result, msg string, cause error) (Result, error) {
	res.Outcome = OutcomeFailed
	res.Message = clip(msg)
	return res, &FailedError{Status: res.Status, Message: res.Message, Err: cause}
}

func isTimeout(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// describe renders the destination's answer: the status, then the operation
// failure, the Nexus failure message or the start of the body.
func describe(status int, c *capture, err error) string {
	prefix := fmt.Sprintf("HTTP %d", status)
	if t := http.StatusText(status); t != "" {
		prefix += " " + t
	}
	if c.tooLarge {
		return prefix + ": " + ErrResponseTooLarge.Error()
	}
	var opErr *nexus.OperationError
	if errors.As(err, &opErr) {
		return prefix + ": " + clipN(opErr.Error(), MaxAnswerBytes)
	}
	if status/100 == 2 && err != nil {
		return prefix + ": invalid response: " + clipN(err.Error(), MaxAnswerBytes)
	}
	if m := bodyMessage(c); m != "" {
		return prefix + ": " + clipN(m, MaxAnswerBytes)
	}
	return prefix
}

// bodyMessage extracts a Nexus Failure message from a JSON body, or the
// printable start of any other body.
func bodyMessage(c *capture) string {
	if len(c.snippet) == 0 {
		return ""
	}
	if mt, _, err := mime.ParseMediaType(c.header.Get("Content-Type")); err == nil && mt == "application/json" {
		var f struct {
			Message string `json:"message"`
		}
		if json.Unmarshal(c.snippet, &f) == nil && f.Message != "" {
			return printable(f.Message)
		}
	}
	return printable(string(c.snippet))
}

// printable keeps a message safe to record and log: valid UTF-8, no control
// characters, bounded.
func printable(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, s)
	return clip(strings.TrimSpace(s))
}

func clip(s string) string { return clipN(s, maxMessage) }

// clipN bounds s to n bytes (plus an ellipsis), on a rune boundary.
func clipN(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "…"
}
