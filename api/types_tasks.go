package api

import (
	"encoding/json"
	"time"

	"fusebox/raftstore/state"
	"fusebox/tasks"
	"fusebox/transport"
)

// Wire types of the task API (POST /v1/tasks, GET /v1/tasks/{id},
// GET /v1/tasks, GET /v1/dlq, POST /v1/dlq/redrive). External contract:
// add fields, never rename them.

// TaskSubmit is the body of POST /v1/tasks and one item of a batch;
// TaskRequest is the call a task makes. Both are the task domain's wire
// request (package tasks), which validates them.
type (
	TaskSubmit  = tasks.Submit
	TaskRequest = tasks.Request
)

// TaskAccepted is the 202 answer of a submit.
type TaskAccepted struct {
	TaskID string `json:"task_id"`
	Shard  int    `json:"shard"`
	// Duplicate is true when the request id was seen before: TaskID and
	// Shard are the original task's and nothing new was queued.
	Duplicate bool `json:"duplicate,omitempty"`
}

// TaskBatchSubmit is the body of POST /v1/tasks:batch.
type TaskBatchSubmit struct {
	Tasks []TaskSubmit `json:"tasks"`
}

// Batch item outcomes.
const (
	OutcomeAccepted  = "accepted"
	OutcomeDuplicate = "duplicate"
	// OutcomeOverloaded: a backlog limit refused the task (Reason says
	// which); it was not queued, resubmit it later.
	OutcomeOverloaded = "overloaded"
)

// TaskBatchItem is the answer for one task of a batch, in request order.
type TaskBatchItem struct {
	TaskID  string `json:"task_id,omitempty"`
	Shard   int    `json:"shard"`
	Outcome string `json:"outcome"`
	// Reason says which limit refused an overloaded task:
	// destination_backlog or pending_limit.
	Reason string `json:"reason,omitempty"`
}

// TaskBatchAccepted is the 202 answer of a batch submit.
type TaskBatchAccepted struct {
	Results []TaskBatchItem `json:"results"`
	// RetryAfter, in seconds, is set when some tasks were overloaded.
	RetryAfter int `json:"retry_after,omitempty"`
}

// Task is GET /v1/tasks/{id} and one entry of a listing (listings leave
// Request out).
type Task struct {
	ID            string      `json:"id"`
	Shard         int         `json:"shard"`
	NamespaceID   string      `json:"namespace_id"`
	WorkflowID    string      `json:"workflow_id"`
	TaskGroup     string      `json:"task_group"`
	Destination   string      `json:"destination"`
	RequestID     string      `json:"request_id,omitempty"`
	Status        string      `json:"status"`
	Attempts      int         `json:"attempts"`
	NextAttemptAt time.Time   `json:"next_attempt_at,omitzero"`
	CreatedAt     time.Time   `json:"created_at"`
	CompletedAt   time.Time   `json:"completed_at,omitzero"`
	LastAnswer    *TaskAnswer `json:"last_answer,omitempty"`
	// Blocked is set while the task waits because an open circuit breaker
	// refused its last attempt (Temporal's BLOCKED).
	Blocked     *TaskBlocked    `json:"blocked,omitempty"`
	OperationID string          `json:"operation_id,omitempty"`
	Output      json.RawMessage `json:"output,omitempty"`
	Request     json.RawMessage `json:"request,omitempty"`

	// Deadline is the schedule-to-close deadline (absent: none).
	Deadline time.Time `json:"deadline,omitzero"`
}

// TaskBlocked says why and until when a pending task is blocked: its
// owner's breaker for the task's key refused the last attempt, and Until is
// when the owner tries it again (the breaker's probe time, plus up to 20 %
// spread). A close of the breaker before then makes the task due at once.
type TaskBlocked struct {
	Reason string    `json:"reason"`
	Until  time.Time `json:"until"`
}

// BlockedReason is TaskBlocked.Reason.
const BlockedReason = "circuit breaker open"

// TaskAnswer is the destination's last answer (or the error instead).
type TaskAnswer struct {
	HTTPStatus int    `json:"http_status,omitempty"`
	Message    string `json:"message,omitempty"`
}

// TaskList is GET /v1/tasks and GET /v1/dlq. Next, when set, is the
// `after` of the next page.
type TaskList struct {
	Tasks []Task `json:"tasks"`
	Next  string `json:"next,omitempty"`
}

// TaskListQuery filters GET /v1/tasks (zero values: no filter).
type TaskListQuery struct {
	Shard  *int
	Status string
	After  string
	Limit  int
}

// Redrive is the body of POST /v1/dlq/redrive: ids, or all.
type Redrive struct {
	IDs []string `json:"ids,omitempty"`
	All bool     `json:"all,omitempty"`
}

// RedriveResult answers a redrive with the ids moved back to pending.
type RedriveResult struct {
	Redriven []string `json:"redriven"`
	Count    int      `json:"count"`
	// More is set when "all" stopped before the DLQ was empty.
	More bool `json:"more,omitempty"`
}

// redactNames gives the extra header names to redact for a task.
type redactNames interface {
	RedactHeaderNames(namespace, destination string) []string
}

// toTask renders a stored task for every read (get, list, DLQ): the
// destination with its query and credentials redacted, and, with
// withRequest, the request with secret header values and URL queries
// redacted (transport.Request.Redacted). Nothing read back carries a secret
// that was submitted; the executor still sends the stored values.
func toTask(t state.Task, withRequest bool, names redactNames) Task {
	out := Task{
		ID: t.ID, Shard: t.Shard, NamespaceID: t.NamespaceID, WorkflowID: t.WorkflowID, TaskGroup: t.TaskGroup,
		Destination: transport.RedactURL(t.Destination), RequestID: t.RequestID, Status: t.Status, Attempts: t.Attempts,
		CreatedAt: t.CreatedAt, CompletedAt: t.CompletedAt, OperationID: t.OperationID, Output: t.Output,
		Deadline: t.Deadline,
	}
	if t.Status == state.TaskPending {
		out.NextAttemptAt = t.NextAttemptAt
	}
	if t.IsBlocked() {
		out.Blocked = &TaskBlocked{Reason: BlockedReason, Until: t.NextAttemptAt}
	}
	if t.HTTPStatus != 0 || t.Message != "" {
		out.LastAnswer = &TaskAnswer{HTTPStatus: t.HTTPStatus, Message: t.Message}
	}
	if withRequest {
		out.Request = redactRequest(t, names)
	}
	return out
}

// redactRequest re-encodes a stored request with its secrets redacted. A
// request that does not decode (written by another version) is not shown
// at all: showing it raw could show a secret.
func redactRequest(t state.Task, names redactNames) json.RawMessage {
	if len(t.Request) == 0 {
		return nil
	}
	var req transport.Request
	if err := json.Unmarshal(t.Request, &req); err != nil {
		return json.RawMessage(`{"error":"the stored request does not decode; not shown"}`)
	}
	var extra []string
	if names != nil {
		extra = names.RedactHeaderNames(t.NamespaceID, transport.BreakerDestination(t.TaskGroup, t.Destination))
	}
	b, err := json.Marshal(req.Redacted(extra))
	if err != nil {
		return json.RawMessage(`{"error":"the stored request does not encode; not shown"}`)
	}
	return b
}
