package transport

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
)

// Error codes carried in every error body: {"error": {"code": ..., "message": ...}}.
// Codes are part of the external contract; append, never rename.
const (
	CodeInvalidArgument = "invalid_argument"
	CodeNotFound        = "not_found"
	CodeConflict        = "conflict"
	CodeUnauthenticated = "unauthenticated"
	CodePermission      = "permission_denied"
	CodeTooLarge        = "payload_too_large"
	CodeOverloaded      = "resource_exhausted"
	CodeNotLeader       = "not_leader"
	CodeNoLeader        = "no_leader"
	CodeUnavailable     = "unavailable"
	CodeWrongOwner      = "wrong_owner"
	CodeInternal        = "internal"
)

// Error is the wire form of every API error. Typed fields survive the trip
// so the client can rebuild the server's typed error (Temporal's
// ShardOwnershipLost{OwnerHost} pattern): never match on Message.
type Error struct {
	Status  int    `json:"-"`
	Code    string `json:"code"`
	Message string `json:"message"`
	// Field names the offending input field for invalid_argument.
	Field string `json:"field,omitempty"`
	// Key names the offending dynamic-config key.
	Key string `json:"key,omitempty"`
	// Leader is the leader's node id for not_leader.
	Leader string `json:"leader,omitempty"`
	// Shard, Owner and Epoch describe the current owner for wrong_owner.
	Shard *int   `json:"shard,omitempty"`
	Owner string `json:"owner,omitempty"`
	Epoch uint64 `json:"epoch,omitempty"`
	// RetryAfter, in seconds, for resource_exhausted and unavailable.
	RetryAfter int `json:"retry_after,omitempty"`
}

// Error reads "code: key: field: message", leaving out what is empty.
func (e *Error) Error() string {
	s := e.Code
	for _, f := range []string{e.Key, e.Field, e.Message} {
		if f != "" {
			s += ": " + f
		}
	}
	return s
}

// Is makes errors.Is(err, &Error{Code: c}) match by code.
func (e *Error) Is(target error) bool {
	var t *Error
	if !errors.As(target, &t) {
		return false
	}
	return t.Code == e.Code && t.Status == 0 && t.Message == ""
}

type errorBody struct {
	Error *Error `json:"error"`
}

// Errorf builds an Error with an HTTP status.
func Errorf(status int, code, format string, args ...any) *Error {
	return &Error{Status: status, Code: code, Message: fmt.Sprintf(format, args...)}
}

// BadField is a 400 naming the field.
func BadField(field, format string, args ...any) *Error {
	e := Errorf(http.StatusBadRequest, CodeInvalidArgument, format, args...)
	e.Field = field
	return e
}

// statusOf picks the HTTP status for a code when the Error has none.
func statusOf(code string) int {
	switch code {
	case CodeInvalidArgument:
		return http.StatusBadRequest
	case CodeNotFound:
		return http.StatusNotFound
	case CodeConflict, CodeWrongOwner:
		return http.StatusConflict
	case CodeUnauthenticated:
		return http.StatusUnauthorized
	case CodePermission:
		return http.StatusForbidden
	case CodeTooLarge:
		return http.StatusRequestEntityTooLarge
	case CodeOverloaded:
		return http.StatusTooManyRequests
	case CodeNotLeader, CodeNoLeader, CodeUnavailable:
		return http.StatusServiceUnavailable
	default:
		return http.StatusInternalServerError
	}
}

// writeError writes err as the API's error body. Errors that are not *Error
// are translated by the server's ErrorMapper first.
func writeError(w http.ResponseWriter, e *Error) {
	status := e.Status
	if status == 0 {
		status = statusOf(e.Code)
	}
	if e.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(e.RetryAfter))
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(errorBody{Error: e})
}

// decodeError rebuilds an *Error from a non-2xx response body.
func decodeError(status int, body []byte) *Error {
	var b errorBody
	if err := json.Unmarshal(body, &b); err != nil || b.Error == nil || b.Error.Code == "" {
		msg := string(body)
		if len(msg) > 512 {
			msg = msg[:512] + "…"
		}
		return &Error{Status: status, Code: codeForStatus(status), Message: fmt.Sprintf("HTTP %d: %s", status, msg)}
	}
	b.Error.Status = status
	return b.Error
}

func codeForStatus(status int) string {
	switch status {
	case http.StatusBadRequest:
		return CodeInvalidArgument
	case http.StatusNotFound:
		return CodeNotFound
	case http.StatusConflict:
		return CodeConflict
	case http.StatusUnauthorized:
		return CodeUnauthenticated
	case http.StatusForbidden:
		return CodePermission
	case http.StatusRequestEntityTooLarge:
		return CodeTooLarge
	case http.StatusTooManyRequests:
		return CodeOverloaded
	case http.StatusServiceUnavailable:
		return CodeUnavailable
	default:
		return CodeInternal
	}
}
