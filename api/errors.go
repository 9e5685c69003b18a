package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"fusebox/errcode"
)

// Error codes carried in every error body: {"error": {"code": ..., "message": ...}}.
// They are package errcode's one table, named here for the API's callers.
const (
	CodeInvalidArgument  = errcode.InvalidArgument
	CodeNotFound         = errcode.NotFound
	CodeConflict         = errcode.Conflict
	CodeUnauthenticated  = errcode.Unauthenticated
	CodePermission       = errcode.PermissionDenied
	CodeMethodNotAllowed = errcode.MethodNotAllowed
	CodeTooLarge         = errcode.TooLarge
	CodeOverloaded       = errcode.Overloaded
	CodeNotLeader        = errcode.NotLeader
	CodeNoLeader         = errcode.NoLeader
	CodeUnavailable      = errcode.Unavailable
	CodeWrongOwner       = errcode.WrongOwner
	CodeUpgradePending   = errcode.UpgradePending
	CodeInternal         = errcode.Internal
)

// httpStatus is the HTTP status of each code: the API's half of the code
// table (TestErrorCodeTable holds it to package errcode and docs/api.md).
// A status answered without a typed body (a proxy's, say) is read back as
// the first code listed for it in statusCodes.
var httpStatus = map[string]int{
	CodeInvalidArgument:  http.StatusBadRequest,
	CodeUnauthenticated:  http.StatusUnauthorized,
	CodePermission:       http.StatusForbidden,
	CodeNotFound:         http.StatusNotFound,
	CodeMethodNotAllowed: http.StatusMethodNotAllowed,
	CodeConflict:         http.StatusConflict,
	CodeWrongOwner:       http.StatusConflict,
	CodeUpgradePending:   http.StatusConflict,
	CodeTooLarge:         http.StatusRequestEntityTooLarge,
	CodeOverloaded:       http.StatusTooManyRequests,
	CodeNotLeader:        http.StatusServiceUnavailable,
	CodeNoLeader:         http.StatusServiceUnavailable,
	CodeUnavailable:      http.StatusServiceUnavailable,
	CodeInternal:         http.StatusInternalServerError,
}

// statusCodes reads a bare status back as a code.
var statusCodes = map[int]string{
	http.StatusBadRequest:            CodeInvalidArgument,
	http.StatusUnauthorized:          CodeUnauthenticated,
	http.StatusForbidden:             CodePermission,
	http.StatusNotFound:              CodeNotFound,
	http.StatusMethodNotAllowed:      CodeMethodNotAllowed,
	http.StatusConflict:              CodeConflict,
	http.StatusRequestEntityTooLarge: CodeTooLarge,
	http.StatusTooManyRequests:       CodeOverloaded,
	http.StatusServiceUnavailable:    CodeUnavailable,
}

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
	if st, ok := httpStatus[code]; ok {
		return st
	}
	return http.StatusInternalServerError
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
	if c, ok := statusCodes[status]; ok {
		return c
	}
	return CodeInternal
}
