// Package transport holds fusebox's outbound executors: the code that calls
// destinations nobody in the fleet controls (Nexus start and cancel over the
// Nexus HTTP API, completion callbacks over HTTP) and the classification of
// every outcome into success, a non-retryable failure, or
// *breakerpool.DestinationDownError — the only outcome a breaker counts.
//
// Every use of github.com/nexus-rpc/sdk-go (pinned at v0.4.0) stays inside
// this package; no sdk type appears in its API.
package transport

import (
	"encoding/json"
	"fmt"
	"mime"
	"net/url"
	"strings"
	"time"

	"fusebox/breakerpool"
	"fusebox/internal/fastjson"
)

// DefaultTimeout is the per-request timeout when Request.Timeout is zero
// (Temporal's outbound request timeout).
const DefaultTimeout = 10 * time.Second

// Limits enforced by Request.Validate on untrusted input.
const (
	MaxRequestBodyBytes = 4 << 20 // Input, Body or Completion.Result
	MaxURLBytes         = 8 << 10
	MaxHeaders          = 64
	MaxHeaderValueBytes = 8 << 10
	MaxNameBytes        = 1 << 10 // Service, Operation, RequestID (a token: MaxOperationTokenBytes)
	MaxTimeout          = 10 * time.Minute
)

// Completion states of a Nexus operation delivered by a callback.
const (
	CompletionSucceeded = "succeeded"
	CompletionFailed    = "failed"
	CompletionCanceled  = "canceled"
)

// Completion is a Nexus operation completion delivered to a callback URL.
type Completion struct {
	// State is CompletionSucceeded, CompletionFailed or CompletionCanceled.
	State string `json:"state"`
	// Result is the JSON result of a succeeded operation (may be empty).
	Result json.RawMessage `json:"result,omitempty"`
	// FailureMessage says why a failed or canceled operation ended.
	FailureMessage string `json:"failure_message,omitempty"`
	// OperationToken identifies the operation (optional; lets the receiver
	// match a completion that arrives before the start response).
	OperationToken string `json:"operation_token,omitempty"`
	// StartTime is when the operation started (optional).
	StartTime time.Time `json:"start_time,omitzero"`
}

// Request is everything an executor needs for one attempt; the queue builds
// it from a durable task. Which fields matter depends on TaskGroup.
type Request struct {
	// TaskGroup is breakerpool.TaskGroupNexusInvocation (start),
	// TaskGroupNexusCancelation (cancel) or TaskGroupCallback.
	TaskGroup string `json:"task_group"`
	// URL is the Nexus endpoint base URL (start, cancel) or the callback URL.
	URL string `json:"url"`
	// Service and Operation name the Nexus operation (start, cancel).
	Service   string `json:"service,omitempty"`
	Operation string `json:"operation,omitempty"`
	// Input is the start input, sent as application/json (may be empty).
	Input json.RawMessage `json:"input,omitempty"`
	// OperationID is the token of the operation to cancel.
	OperationID string `json:"operation_id,omitempty"`
	// RequestID is the idempotency key sent as Nexus-Request-Id. Required
	// for start; sent when set for cancel and callbacks.
	RequestID string `json:"request_id,omitempty"`
	// CallbackURL is where the handler of an async start delivers its
	// completion (optional); CallbackHeader travels with it.
	CallbackURL    string            `json:"callback_url,omitempty"`
	CallbackHeader map[string]string `json:"callback_header,omitempty"`
	// Completion (a Nexus completion) or Body (a raw body POSTed as-is with
	// ContentType, default application/octet-stream): exactly one, callbacks only.
	Completion  *Completion `json:"completion,omitempty"`
	Body        []byte      `json:"body,omitempty"`
	ContentType string      `json:"content_type,omitempty"`
	// Header holds extra request headers (e.g. Authorization).
	Header map[string]string `json:"header,omitempty"`
	// Timeout bounds the whole attempt, response body included; 0 means
	// DefaultTimeout.
	Timeout time.Duration `json:"timeout,omitempty"`
	// Namespace and Destination label the request series (requests.go):
	// the task's namespace and its breaker key's destination (an endpoint
	// name, a callback's scheme://host). The queue sets them for each
	// attempt; they are never stored nor read from the API. An empty
	// Destination is derived from URL as scheme://host.
	Namespace   string `json:"-"`
	Destination string `json:"-"`
	// Deadline is the task's schedule-to-close deadline (zero: none), set
	// by the queue for each attempt like Namespace, never stored: a Nexus
	// start tells the handler the time left in Operation-Timeout.
	Deadline time.Time `json:"-"`
	// MaxOutput, when > 0 and below MaxOutputBytes, bounds a sync start's
	// output as stored (fusebox.tasks.maxOutputBytes), set per attempt and
	// never stored like Deadline.
	MaxOutput int `json:"-"`
}

// ValidationError names the field of a Request that can never succeed.
type ValidationError struct {
	Field  string // the JSON name of the field, e.g. "url" or "header[X-Foo]"
	Reason string
}

func (e *ValidationError) Error() string {
	return "invalid outbound request: " + e.Field + ": " + e.Reason
}

func invalid(field, format string, args ...any) error {
	return &ValidationError{Field: field, Reason: fmt.Sprintf(format, args...)}
}

// timeout returns the effective timeout of r.
func (r *Request) timeout() time.Duration {
	if r.Timeout == 0 {
		return DefaultTimeout
	}
	return r.Timeout
}

// Validate reports the first field of r that makes it impossible to deliver,
// as a *ValidationError. The queue calls it at submit time; Execute calls it
// again before every attempt.
func (r *Request) Validate() error {
	if err := validateURL("url", r.URL); err != nil {
		return err
	}
	if r.Timeout < 0 || r.Timeout > MaxTimeout {
		return invalid("timeout", "must be between 0 (default %s) and %s, got %s", DefaultTimeout, MaxTimeout, r.Timeout)
	}
	if err := validateName("request_id", r.RequestID, false); err != nil {
		return err
	}
	if err := validateHeader("header", r.Header); err != nil {
		return err
	}
	switch r.TaskGroup {
	case breakerpool.TaskGroupNexusInvocation:
		return r.validateStart()
	case breakerpool.TaskGroupNexusCancelation:
		return r.validateCancel()
	case breakerpool.TaskGroupCallback:
		return r.validateCallback()
	case "":
		return invalid("task_group", "required")
	default:
		return invalid("task_group", "unknown task group %q (want %q, %q or %q)", r.TaskGroup,
			breakerpool.TaskGroupNexusInvocation, breakerpool.TaskGroupNexusCancelation, breakerpool.TaskGroupCallback)
	}
}

func (r *Request) validateStart() error {
	if err := r.validateNexusNames(); err != nil {
		return err
	}
	if err := validateName("request_id", r.RequestID, true); err != nil {
		return err
	}
	if len(r.Input) > MaxRequestBodyBytes {
		return invalid("input", "%d bytes exceeds the %d byte limit", len(r.Input), MaxRequestBodyBytes)
	}
	if len(r.Input) > 0 && !fastjson.Valid(r.Input) {
		return invalid("input", "not valid JSON")
	}
	if r.CallbackURL != "" {
		if err := validateURL("callback_url", r.CallbackURL); err != nil {
			return err
		}
	}
	if err := validateHeader("callback_header", r.CallbackHeader); err != nil {
		return err
	}
	return r.noCallbackFields()
}

func (r *Request) validateCancel() error {
	if err := r.validateNexusNames(); err != nil {
		return err
	}
	if err := validateToken("operation_id", r.OperationID, true); err != nil {
		return err
	}
	if len(r.Input) > 0 {
		return invalid("input", "not allowed for a cancel")
	}
	return r.noCallbackFields()
}

func (r *Request) validateNexusNames() error {
	if err := validateName("service", r.Service, true); err != nil {
		return err
	}
	return validateName("operation", r.Operation, true)
}

func (r *Request) noCallbackFields() error {
	switch {
	case r.Completion != nil:
		return invalid("completion", "only for task group %q", breakerpool.TaskGroupCallback)
	case len(r.Body) > 0:
		return invalid("body", "only for task group %q", breakerpool.TaskGroupCallback)
	case r.ContentType != "":
		return invalid("content_type", "only for task group %q", breakerpool.TaskGroupCallback)
	}
	return nil
}

func (r *Request) validateCallback() error {
	switch {
	case r.Service != "":
		return invalid("service", "not used by callbacks (service, operation, input and operation_id are a Nexus start's)")
	case r.Operation != "":
		return invalid("operation", "not used by callbacks (service, operation, input and operation_id are a Nexus start's)")
	case len(r.Input) > 0:
		return invalid("input", "not used by callbacks (a callback sends its completion or body)")
	case r.OperationID != "":
		return invalid("operation_id", "not used by callbacks (service, operation, input and operation_id are a Nexus start's)")
	case r.CallbackURL != "":
		return invalid("callback_url", "not used by callbacks (url is the callback URL)")
	case len(r.CallbackHeader) > 0:
		return invalid("callback_header", "not used by callbacks (header sets the callback's own headers)")
	case r.Completion == nil && len(r.Body) == 0:
		return invalid("completion", "a callback needs a completion or a non-empty body")
	case r.Completion != nil && len(r.Body) > 0:
		return invalid("body", "set either completion or body, not both")
	case len(r.Body) > MaxRequestBodyBytes:
		return invalid("body", "%d bytes exceeds the %d byte limit", len(r.Body), MaxRequestBodyBytes)
	}
	if r.ContentType != "" {
		if r.Completion != nil {
			return invalid("content_type", "only with a raw body")
		}
		if !plainMediaType(r.ContentType) {
			if _, _, err := mime.ParseMediaType(r.ContentType); err != nil {
				return invalid("content_type", "%v", err)
			}
		}
	}
	if c := r.Completion; c != nil {
		switch c.State {
		case CompletionSucceeded:
			if len(c.Result) > MaxRequestBodyBytes {
				return invalid("completion.result", "%d bytes exceeds the %d byte limit", len(c.Result), MaxRequestBodyBytes)
			}
			if len(c.Result) > 0 && !fastjson.Valid(c.Result) {
				return invalid("completion.result", "not valid JSON")
			}
			if c.FailureMessage != "" {
				return invalid("completion.failure_message", "not allowed when state is %q", c.State)
			}
		case CompletionFailed, CompletionCanceled:
			if len(c.Result) > 0 {
				return invalid("completion.result", "not allowed when state is %q", c.State)
			}
			if len(c.FailureMessage) > MaxHeaderValueBytes {
				return invalid("completion.failure_message", "longer than %d bytes", MaxHeaderValueBytes)
			}
		default:
			return invalid("completion.state", "must be %q, %q or %q, got %q",
				CompletionSucceeded, CompletionFailed, CompletionCanceled, c.State)
		}
		if err := validateToken("completion.operation_token", c.OperationToken, false); err != nil {
			return err
		}
	}
	return nil
}

func validateURL(field, raw string) error {
	if raw == "" {
		return invalid(field, "required")
	}
	if len(raw) > MaxURLBytes {
		return invalid(field, "longer than %d bytes", MaxURLBytes)
	}
	if plainHTTPURL(raw) {
		return nil
	}
	u, err := url.Parse(raw)
	if err != nil {
		return invalid(field, "not a URL")
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return invalid(field, "scheme must be http or https, got %q", u.Scheme)
	}
	if u.Host == "" {
		return invalid(field, "missing host")
	}
	if u.Hostname() == "" {
		// http://:8470/ has a port and no host: Go dials it on this host.
		return invalid(field, "missing host name (a URL like http://:PORT/ connects to this host)")
	}
	if u.User != nil {
		return invalid(field, "must not carry credentials (send them in header)")
	}
	if u.Fragment != "" {
		return invalid(field, "must not have a fragment")
	}
	return nil
}

// plainHTTPURL reports, without url.Parse, that validateURL accepts raw:
// plainOrigin's common form (which has a host and no credentials) with the
// scheme http or https and no '#' (a fragment, even an empty one, is left
// to the parse). Validate runs at every submit and every attempt, and the
// parse was most of it: 2 % of the CPU of a durably delivered task.
// FuzzValidateURL holds it to the parse's answer.
func plainHTTPURL(raw string) bool {
	origin, ok := plainOrigin(raw)
	if !ok || !strings.HasPrefix(origin, "http://") && !strings.HasPrefix(origin, "https://") {
		return false
	}
	return strings.IndexByte(raw[len(origin):], '#') < 0
}

// plainMediaType reports, without mime.ParseMediaType (a map allocated
// per call), that a content type is a valid type/subtype without
// parameters: two non-empty tokens around one '/'. Anything else is left
// to the parse; FuzzPlainMediaType holds it to the parse's answer.
func plainMediaType(v string) bool {
	typ, sub, ok := strings.Cut(v, "/")
	return ok && mediaToken(typ) && mediaToken(sub)
}

// mediaToken reports whether s is a non-empty RFC 2045 token.
func mediaToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c <= ' ' || c >= 0x7f || strings.IndexByte(`()<>@,;:\"/[]?=`, c) >= 0 {
			return false
		}
	}
	return true
}

func validateName(field, v string, required bool) error {
	return validateBounded(field, v, required, MaxNameBytes)
}

// validateToken checks an operation token (a cancel's operation_id, a
// completion's operation_token) against MaxOperationTokenBytes, the bound
// of the token a start records: one shared limit, so whatever fusebox
// recorded (and whatever Temporal accepts, up to its
// limit.operation.token.length of 4096) can be cancelled and completed.
// Under MaxNameBytes (1 KiB) tokens from 1 to 4 KiB were refused at submit.
func validateToken(field, v string, required bool) error {
	return validateBounded(field, v, required, MaxOperationTokenBytes)
}

func validateBounded(field, v string, required bool, maxBytes int) error {
	if v == "" {
		if required {
			return invalid(field, "required")
		}
		return nil
	}
	if len(v) > maxBytes {
		return invalid(field, "longer than %d bytes", maxBytes)
	}
	if !validHeaderValue(v) {
		return invalid(field, "contains control characters")
	}
	return nil
}

// reservedHeaders are set by the executor or by net/http and may not be
// overridden by Request.Header.
var reservedHeaders = map[string]bool{
	"host": true, "connection": true, "keep-alive": true, "proxy-connection": true,
	"transfer-encoding": true, "te": true, "trailer": true, "upgrade": true,
	"nexus-request-id": true, "request-timeout": true, "nexus-operation-token": true,
	"nexus-operation-id": true, "nexus-operation-state": true, "nexus-link": true,
	"nexus-operation-start-time": true,
}

func validateHeader(field string, h map[string]string) error {
	if len(h) > MaxHeaders {
		return invalid(field, "more than %d headers", MaxHeaders)
	}
	for k, v := range h {
		f := field + "[" + printableKey(k) + "]"
		if !validHeaderName(k) {
			return invalid(f, "not a valid header name")
		}
		lk := strings.ToLower(k)
		if reservedHeaders[lk] || strings.HasPrefix(lk, "content-") {
			return invalid(f, "reserved header")
		}
		if len(v) > MaxHeaderValueBytes {
			return invalid(f, "value longer than %d bytes", MaxHeaderValueBytes)
		}
		if !validHeaderValue(v) {
			return invalid(f, "value contains control characters")
		}
	}
	return nil
}

// printableKey bounds a header name echoed in an error.
func printableKey(k string) string {
	if len(k) > 64 {
		k = k[:64] + "…"
	}
	return strings.ToValidUTF8(k, "?")
}

// validHeaderName reports whether s is an RFC 9110 token.
func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}

// validHeaderValue rejects control characters other than horizontal tab.
func validHeaderValue(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < ' ' && c != '\t') || c == 0x7f {
			return false
		}
	}
	return true
}
