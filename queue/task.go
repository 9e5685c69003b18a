// Package queue is fusebox's outbound task queue: per-shard readers that load
// due tasks from the replicated task table, and a host-wide scheduler that
// groups them by (TaskGroup, NamespaceID, Destination) and runs each group
// through buffer → concurrency limiter → circuit breaker → rate limiter →
// executor, then writes the outcomes back in batched, epoch-fenced writes.
//
// Durable storage is not here: the queue works against the small Store,
// Ownership, LimitsSource, Breakers, Executor and Resolver interfaces
// declared in deps.go. See DESIGN.md for the load-bearing decisions.
package queue

import (
	"encoding/json"
	"time"

	"fusebox/breakerpool"
	"fusebox/transport"
)

// Status is where a task is in its life.
type Status string

// Task statuses. Pending is the only non-terminal one.
const (
	StatusPending   Status = "pending"
	StatusSucceeded Status = "succeeded"
	StatusFailed    Status = "failed"
	StatusDLQ       Status = "dlq"
)

// Terminal reports whether s is a final status.
func (s Status) Terminal() bool {
	return s == StatusSucceeded || s == StatusFailed || s == StatusDLQ
}

// Task is one outbound task as the queue sees it: a row of the replicated
// task table.
type Task struct {
	ID          string `json:"id"`
	Shard       int    `json:"shard"`
	NamespaceID string `json:"namespace_id"`
	WorkflowID  string `json:"workflow_id"`
	// TaskGroup is one of breakerpool.TaskGroup*; anything else is poison.
	TaskGroup string `json:"task_group"`
	// Destination is the Nexus endpoint name (Nexus task groups) or the
	// callback URL; Key derives the breaker key's third part from it.
	Destination string `json:"destination"`
	// Request is the call to make. For the Nexus task groups its URL is
	// resolved from Destination at every attempt when the queue has a
	// Resolver.
	Request transport.Request `json:"request"`
	// Attempts counts calls that reached the executor.
	Attempts int `json:"attempts"`
	// Blocked counts consecutive breaker rejections since the last attempt.
	Blocked int `json:"blocked,omitempty"`
	// Unexpected counts unexpected errors; too many send the task to the DLQ.
	Unexpected    int       `json:"unexpected,omitempty"`
	NextAttemptAt time.Time `json:"next_attempt_at"`
	CreatedAt     time.Time `json:"created_at"`
	// Deadline is the task's schedule-to-close deadline, fixed at submit
	// (zero: none). Undelivered by then, the task fails "deadline exceeded"
	// (deadline.go); no retry is scheduled after it.
	Deadline time.Time `json:"deadline,omitzero"`
	Status   Status    `json:"status"`
	// Message and HTTPStatus record the last answer (or error).
	Message    string `json:"message,omitempty"`
	HTTPStatus int    `json:"http_status,omitempty"`
	// OperationID and Output record a successful Nexus start.
	OperationID string          `json:"operation_id,omitempty"`
	Output      json.RawMessage `json:"output,omitempty"`
	// AttemptEpoch is the shard epoch under which an attempt began (a
	// start marker was written) and has recorded no result since; 0: none
	// (redelivery.go).
	AttemptEpoch uint64 `json:"attempt_epoch,omitempty"`
}

// Key is the task's scheduler group and breaker key. Its Destination is
// transport.BreakerDestination: the endpoint name, or a callback URL's
// scheme://host[:port] — never a path or a query (Temporal's key). This is
// the one place a task's key is derived; the limits and timeouts the queue
// looks up in dynamic config use the same destination.
func (t *Task) Key() breakerpool.Key {
	return breakerpool.Key{TaskGroup: t.TaskGroup, NamespaceID: t.NamespaceID,
		Destination: transport.BreakerDestination(t.TaskGroup, t.Destination)}
}

// Result is the outcome of one dispatch of a task, written back through
// Store.Complete. Status is terminal, or StatusPending for a retry (then
// NextAttemptAt says when). The counters are the task's new values.
type Result struct {
	TaskID        string          `json:"task_id"`
	Status        Status          `json:"status"`
	Attempts      int             `json:"attempts"`
	Blocked       int             `json:"blocked,omitempty"`
	Unexpected    int             `json:"unexpected,omitempty"`
	NextAttemptAt time.Time       `json:"next_attempt_at,omitzero"`
	Message       string          `json:"message,omitempty"`
	HTTPStatus    int             `json:"http_status,omitempty"`
	OperationID   string          `json:"operation_id,omitempty"`
	Output        json.RawMessage `json:"output,omitempty"`
	// Started marks a start marker (redelivery.go): an attempt began under
	// the write's epoch. The store sets the task's AttemptEpoch to that
	// epoch and changes nothing else; any other result clears it.
	Started bool `json:"started,omitempty"`
}

// Apply returns t updated by r, as a store applies a result. It does not
// check r.TaskID. A start marker changes nothing here: the store, which
// knows the write's epoch, sets AttemptEpoch.
func (r *Result) Apply(t Task) Task {
	if r.Started {
		return t
	}
	t.AttemptEpoch = 0
	t.Status = r.Status
	t.Attempts = r.Attempts
	t.Blocked = r.Blocked
	t.Unexpected = r.Unexpected
	if r.Status == StatusPending {
		t.NextAttemptAt = r.NextAttemptAt
		if !t.Deadline.IsZero() && t.NextAttemptAt.After(t.Deadline) {
			t.NextAttemptAt = t.Deadline // due at its deadline, to fail then
		}
	}
	t.Message = r.Message
	t.HTTPStatus = r.HTTPStatus
	if r.OperationID != "" {
		t.OperationID = r.OperationID
	}
	if r.Output != nil {
		t.Output = r.Output
	}
	return t
}

// knownTaskGroup reports whether g is a task group the queue can deliver.
func knownTaskGroup(g string) bool {
	switch g {
	case breakerpool.TaskGroupNexusInvocation, breakerpool.TaskGroupNexusCancelation, breakerpool.TaskGroupCallback:
		return true
	}
	return false
}

// isNexus reports whether g's URL comes from the endpoint registry.
func isNexus(g string) bool {
	return g == breakerpool.TaskGroupNexusInvocation || g == breakerpool.TaskGroupNexusCancelation
}
