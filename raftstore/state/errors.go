package state

import (
	"errors"
	"fmt"

	"fusebox/errcode"
)

// Error codes: the ones a raftstore write can fail with, from the one table
// (package errcode). They travel on the wire (forwarded writes, the HTTP API)
// and are rebuilt into *Error on the other side; callers match them with
// errors.Is against the sentinels below, never by message text. Their HTTP
// statuses are the API's (api/errors.go).
const (
	CodeInvalidArgument = errcode.InvalidArgument
	CodeNotFound        = errcode.NotFound
	CodeConflict        = errcode.Conflict
	CodeNotLeader       = errcode.NotLeader
	CodeNoLeader        = errcode.NoLeader
	CodeUnavailable     = errcode.Unavailable
	CodeInternal        = errcode.Internal
)

// Error is the typed error of every raftstore write. It is a plain value so it
// survives JSON: Code is machine-readable, Field names the offending input
// field for invalid_argument, Leader carries the leader's raft address (and
// LeaderID its id) for not_leader.
type Error struct {
	Code     string `json:"code"`
	Message  string `json:"message"`
	Field    string `json:"field,omitempty"`
	Leader   string `json:"leader,omitempty"`
	LeaderID string `json:"leader_id,omitempty"`
}

// Sentinels for errors.Is. Any *Error with the same Code matches.
var (
	ErrInvalidArgument = &Error{Code: CodeInvalidArgument, Message: "invalid argument"}
	ErrNotFound        = &Error{Code: CodeNotFound, Message: "not found"}
	ErrConflict        = &Error{Code: CodeConflict, Message: "conflict"}
	ErrNotLeader       = &Error{Code: CodeNotLeader, Message: "this node is not the raft leader"}
	ErrNoLeader        = &Error{Code: CodeNoLeader, Message: "no raft leader"}
	ErrUnavailable     = &Error{Code: CodeUnavailable, Message: "unavailable"}
)

func (e *Error) Error() string {
	s := e.Code
	if e.Field != "" {
		s += ": " + e.Field
	}
	if e.Message != "" {
		s += ": " + e.Message
	}
	if e.Leader != "" {
		s += " (leader " + e.Leader + ")"
	}
	return s
}

// Is matches any *Error with the same Code, so errors.Is(err, ErrNotLeader)
// works on errors rebuilt from the wire.
func (e *Error) Is(target error) bool {
	var t *Error
	if !errors.As(target, &t) {
		return false
	}
	return t.Code == e.Code
}

// Retryable reports whether the same command (with the same request id) may be
// sent again: the cluster was in transition, the command itself was fine.
func (e *Error) Retryable() bool { return errcode.Retryable(e.Code) }

func invalidArg(field, format string, args ...any) *Error {
	return &Error{Code: CodeInvalidArgument, Field: field, Message: fmt.Sprintf(format, args...)}
}

func notFound(format string, args ...any) *Error {
	return &Error{Code: CodeNotFound, Message: fmt.Sprintf(format, args...)}
}

func conflict(field, format string, args ...any) *Error {
	return &Error{Code: CodeConflict, Field: field, Message: fmt.Sprintf(format, args...)}
}

// AsError converts any error into *Error: an *Error anywhere in the chain is
// returned as is, anything else becomes an internal error.
func AsError(err error) *Error {
	if err == nil {
		return nil
	}
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return &Error{Code: CodeInternal, Message: err.Error()}
}

// CodeUpgradePending refuses a command type that a server of the raft
// configuration does not know yet (its build advertises an older log
// version). Not retryable: finish the rolling upgrade first.
const CodeUpgradePending = errcode.UpgradePending

// ErrUpgradePending matches (errors.Is) the refusal of a command that waits
// for the cluster's upgrade.
var ErrUpgradePending = &Error{Code: CodeUpgradePending, Message: "a server does not know this command yet"}
