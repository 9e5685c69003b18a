package state

import (
	"bytes"
	crand "crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"fusebox/internal/fastjson"
)

// The task family of commands: values 16–31 of the MessageType table are
// reserved for it (see commands.go). Append only, like the main table.
const (
	// MsgSubmitTasks inserts a batch of new pending tasks.
	MsgSubmitTasks MessageType = 16
	// MsgCompleteTasks applies a batch of delivery results, fenced by the
	// shard's epoch.
	MsgCompleteTasks MessageType = 17
	// MsgRedriveTasks moves dead-lettered tasks back to pending.
	MsgRedriveTasks MessageType = 18
	// MsgCollectTasks deletes terminal tasks completed before a cutoff.
	MsgCollectTasks MessageType = 19
	// 20, 21: MsgSubmitTasksBin, MsgCompleteTasksBin (commands_tasks_bin.go).
	// 22: MsgCompleteTasksMulti (commands_complete_multi.go).
	// 23: MsgImportTasks (commands_tasks_import.go).
	// Next in the family: 24.
)

// Task statuses (the queue names them StatusPending …).
const (
	TaskPending   = "pending"
	TaskSucceeded = "succeeded"
	TaskFailed    = "failed"
	TaskDLQ       = "dlq"
)

// Limits on task commands, enforced by the FSM on every replica.
const (
	// MaxTaskRequestBytes bounds one task's opaque request payload.
	MaxTaskRequestBytes = 256 << 10
	// MaxTaskBatch bounds the tasks of one submit and the results of one
	// complete.
	MaxTaskBatch = 1000
	// MaxRedriveBatch bounds how many tasks one redrive moves; a redrive of
	// "all" reports More when it stopped there.
	MaxRedriveBatch = 1000
	// MaxCollectBatch bounds how many tasks one collect deletes.
	MaxCollectBatch = 5000
	// MaxTaskMessageBytes bounds a result's message.
	MaxTaskMessageBytes = 4 << 10
	// MaxTaskOutputBytes bounds a result's output (a Nexus start result).
	MaxTaskOutputBytes = 1 << 20
	maxTaskIDBytes     = 128
	maxDestinationLen  = 2048
)

// NewTaskID returns a task id that sorts by creation time: 16 hex digits of
// at's Unix nanoseconds, then 16 random hex digits.
func NewTaskID(at time.Time) string {
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], uint64(at.UnixNano()))
	_, _ = crand.Read(b[8:])
	var out [32]byte
	hex.Encode(out[:], b[:])
	return string(out[:])
}

// NewTask is one task of a submit. ID and Shard are assigned by the
// proposer (Shard = shardmap.ShardOf(NamespaceID, WorkflowID, ShardCount)).
type NewTask struct {
	ID          string `json:"id"`
	Shard       int    `json:"shard"`
	NamespaceID string `json:"namespace_id"`
	WorkflowID  string `json:"workflow_id"`
	TaskGroup   string `json:"task_group"`
	Destination string `json:"destination"`
	// RequestID, when set, makes the submit idempotent per namespace: a
	// second task with the same (NamespaceID, RequestID) is not inserted and
	// the first one's id and shard are returned.
	RequestID string `json:"request_id,omitempty"`
	// Request is the opaque call to make (an transport.Request as JSON).
	Request json.RawMessage `json:"request"`

	// DestinationKey is the breaker destination when it differs from
	// Destination (a callback URL's scheme://host[:port]); the proposer
	// derives it (transport.BreakerDestination), so the log says which
	// destination a task counts against and no replica re-derives it.
	DestinationKey string `json:"destination_key,omitempty"`
	// MaxDestinationBacklog > 0: the task is not inserted (overloaded,
	// reason destination_backlog) while its namespace already has that many
	// pending tasks for its breaker destination. The proposer resolves it
	// from dynamic config (fusebox.tasks.maxDestinationBacklog), so every
	// replica decides alike.
	MaxDestinationBacklog int `json:"max_destination_backlog,omitempty"`
	// MaxPendingTasks > 0: the task is not inserted (overloaded, reason
	// pending_limit) while the table holds that many pending tasks in all
	// (fusebox.tasks.maxPendingTasks).
	MaxPendingTasks int `json:"max_pending_tasks,omitempty"`
	// Deadline is the schedule-to-close deadline the proposer fixed
	// (command time + timeout); zero: none.
	Deadline time.Time `json:"deadline,omitzero"`
}

// SubmitTasksCommand inserts Tasks as pending, due at At. A task over one
// of its own limits (NewTask.MaxDestinationBacklog, MaxPendingTasks) is not
// inserted (its outcome says so); the others are.
//
// MaxShardBacklog is retired: nodes no longer propose it (a shard holds
// every destination's tasks, so one dead destination filled it for all).
// Log entries that carry it still apply as they did: a task whose shard
// already has that many pending tasks is not inserted.
type SubmitTasksCommand struct {
	CommandMeta
	Tasks           []NewTask `json:"tasks"`
	MaxShardBacklog int       `json:"max_shard_backlog,omitempty"`
}

// Submit outcomes.
const (
	SubmitAccepted   = "accepted"
	SubmitDuplicate  = "duplicate"
	SubmitOverloaded = "overloaded"
)

// SubmitOutcome is the answer for one task of a submit, in the order given.
// For a duplicate, TaskID and Shard are the original task's.
type SubmitOutcome struct {
	TaskID  string `json:"task_id"`
	Shard   int    `json:"shard"`
	Outcome string `json:"outcome"`
	// Reason says which limit refused an overloaded task.
	Reason string `json:"reason,omitempty"`
}

// Reasons of an overloaded submit outcome.
const (
	// OverloadDestination: the task's namespace and breaker destination
	// has MaxDestinationBacklog pending tasks.
	OverloadDestination = "destination_backlog"
	// OverloadPending: the table has MaxPendingTasks pending tasks.
	OverloadPending = "pending_limit"
	// OverloadShard: the shard has MaxShardBacklog pending tasks (retired
	// limit; old log entries only).
	OverloadShard = "shard_backlog"
)

// TaskResult is one delivery outcome (queue.Result). Status is terminal, or
// pending for a retry at NextAttemptAt; the counters are the task's new
// values.
type TaskResult struct {
	TaskID        string          `json:"task_id"`
	Status        string          `json:"status"`
	Attempts      int             `json:"attempts"`
	Blocked       int             `json:"blocked,omitempty"`
	Unexpected    int             `json:"unexpected,omitempty"`
	NextAttemptAt time.Time       `json:"next_attempt_at,omitzero"`
	Message       string          `json:"message,omitempty"`
	HTTPStatus    int             `json:"http_status,omitempty"`
	OperationID   string          `json:"operation_id,omitempty"`
	Output        json.RawMessage `json:"output,omitempty"`
	// Started makes the result a start marker: an attempt began under the
	// command's epoch. It sets the row's AttemptEpoch and nothing else (a
	// node that predates it applies the marker as the pending result it is
	// shaped as: the task's own values, so the row does not change). Any
	// other result clears AttemptEpoch.
	Started bool `json:"started,omitempty"`
}

// CompleteTasksCommand applies Results written by Node as the owner of
// Shard at Epoch. A stale epoch (or a node that is not the owner) refuses
// the whole batch; results for unknown tasks, tasks of another shard and
// already terminal tasks are ignored.
type CompleteTasksCommand struct {
	CommandMeta
	Shard   int          `json:"shard"`
	Epoch   uint64       `json:"epoch"`
	Node    string       `json:"node"`
	Results []TaskResult `json:"results"`
}

// CompleteOutcome is the value of a complete: either Refused (the fence
// failed, nothing written) or the counts.
type CompleteOutcome struct {
	Applied int `json:"applied"`
	Ignored int `json:"ignored"`
	// Refused carries the current owner when the fence failed.
	Refused *RefusedShard `json:"refused,omitempty"`
}

// RefusedShard is the current assignment of a shard that refused a write
// (the fields of a *shardmap.WrongOwnerError).
type RefusedShard struct {
	Shard int    `json:"shard"`
	Owner string `json:"owner"`
	Epoch uint64 `json:"epoch"`
}

// RedriveTasksCommand moves dead-lettered tasks back to pending, due at At,
// with their counters reset: the ones in IDs, or with All up to
// MaxRedriveBatch of them (oldest id first). Ids that are not in the DLQ are
// ignored.
type RedriveTasksCommand struct {
	CommandMeta
	IDs []string `json:"ids,omitempty"`
	All bool     `json:"all,omitempty"`
}

// RedriveOutcome is the value of a redrive.
type RedriveOutcome struct {
	Redriven []string `json:"redriven"`
	// More is set when All stopped at MaxRedriveBatch.
	More bool `json:"more,omitempty"`
}

// CollectTasksCommand deletes up to Limit (default and cap MaxCollectBatch)
// succeeded or failed tasks completed before Before. DLQ tasks are never
// collected: they wait for an operator.
type CollectTasksCommand struct {
	CommandMeta
	Before time.Time `json:"before"`
	Limit  int       `json:"limit,omitempty"`
}

// CollectOutcome is the value of a collect.
type CollectOutcome struct {
	Deleted int  `json:"deleted"`
	More    bool `json:"more,omitempty"`
}

// validate checks a submit; errors name the field as tasks[i].field.
func (c *SubmitTasksCommand) Validate() *Error {
	if err := checkMeta(c.CommandMeta); err != nil {
		return err
	}
	if c.MaxShardBacklog < 0 {
		return invalidArg("max_shard_backlog", "must be >= 0")
	}
	return validateTasks(c.Tasks, (*NewTask).Validate)
}

// validateTasks checks a batch of tasks: 1 to MaxTaskBatch of them, each
// valid; a bad one's field is named tasks[i].field.
func validateTasks[T any](tasks []T, validate func(*T) *Error) *Error {
	if len(tasks) == 0 {
		return invalidArg("tasks", "at least one task is required")
	}
	if len(tasks) > MaxTaskBatch {
		return invalidArg("tasks", "%d tasks exceeds the batch limit of %d", len(tasks), MaxTaskBatch)
	}
	for i := range tasks {
		if err := validate(&tasks[i]); err != nil {
			err.Field = fmt.Sprintf("tasks[%d].%s", i, err.Field)
			return err
		}
	}
	return nil
}

func (t *NewTask) Validate() *Error {
	if err := checkTaskID("id", t.ID); err != nil {
		return err
	}
	if t.Shard < 0 {
		return invalidArg("shard", "must be >= 0, got %d", t.Shard)
	}
	for _, f := range []struct {
		name, v  string
		required bool
	}{
		{"namespace_id", t.NamespaceID, true},
		{"workflow_id", t.WorkflowID, true},
		{"task_group", t.TaskGroup, true},
		{"request_id", t.RequestID, false},
	} {
		if err := CheckName(f.name, f.v, f.required); err != nil {
			return err
		}
	}
	if err := checkDestination(t.Destination); err != nil {
		return err
	}
	if t.DestinationKey != "" {
		if err := checkDestination(t.DestinationKey); err != nil {
			err.Field = "destination_key"
			return err
		}
	}
	if t.MaxDestinationBacklog < 0 {
		return invalidArg("max_destination_backlog", "must be >= 0, got %d", t.MaxDestinationBacklog)
	}
	if t.MaxPendingTasks < 0 {
		return invalidArg("max_pending_tasks", "must be >= 0, got %d", t.MaxPendingTasks)
	}
	if len(t.Request) > MaxTaskRequestBytes {
		return invalidArg("request", "%d bytes exceeds the %d byte limit", len(t.Request), MaxTaskRequestBytes)
	}
	return nil
}

func (c *CompleteTasksCommand) Validate() *Error {
	if err := checkMeta(c.CommandMeta); err != nil {
		return err
	}
	if c.Shard < 0 {
		return invalidArg("shard", "must be >= 0, got %d", c.Shard)
	}
	if err := CheckName("node", c.Node, true); err != nil {
		return err
	}
	if len(c.Results) > MaxTaskBatch {
		return invalidArg("results", "%d results exceeds the batch limit of %d", len(c.Results), MaxTaskBatch)
	}
	for i := range c.Results {
		if err := c.Results[i].Validate(); err != nil {
			err.Field = fmt.Sprintf("results[%d].%s", i, err.Field)
			return err
		}
	}
	return nil
}

func (r *TaskResult) Validate() *Error {
	if err := checkTaskID("task_id", r.TaskID); err != nil {
		return err
	}
	switch r.Status {
	case TaskPending:
		if r.NextAttemptAt.IsZero() {
			return invalidArg("next_attempt_at", "required for a pending (retry) result")
		}
	case TaskSucceeded, TaskFailed, TaskDLQ:
	default:
		return invalidArg("status", "want %q, %q, %q or %q, got %q", TaskPending, TaskSucceeded, TaskFailed, TaskDLQ, r.Status)
	}
	if r.Attempts < 0 || r.Blocked < 0 || r.Unexpected < 0 {
		return invalidArg("attempts", "counters must be >= 0")
	}
	if len(r.Message) > MaxTaskMessageBytes {
		return invalidArg("message", "longer than %d bytes", MaxTaskMessageBytes)
	}
	if len(r.OperationID) > 4096 {
		return invalidArg("operation_id", "longer than 4096 bytes")
	}
	if len(r.Output) > MaxTaskOutputBytes {
		return invalidArg("output", "%d bytes exceeds the %d byte limit", len(r.Output), MaxTaskOutputBytes)
	}
	return nil
}

// Payload checks: run by the proposer (ValidateProposal), never by the
// FSM. A task's request and a result's output are opaque to the replicated
// state — stored and returned, never parsed by apply — so whether they
// are JSON cannot change what a replica does with an entry; and parsing
// every request on every replica was most of the apply's validation
// (json.Valid, 88 % of NewTask.Validate in BenchmarkDelivery's profile).
// Any proposer refuses a bad payload before it reaches the log.

// checkRequest: a task's request is a JSON object.
func (t *NewTask) checkRequest() *Error {
	if b := bytes.TrimSpace(t.Request); len(b) == 0 || b[0] != '{' || !fastjson.Valid(b) {
		return invalidArg("request", "must be a JSON object")
	}
	return nil
}

// checkOutput: a result's output, when present, is JSON.
func (r *TaskResult) checkOutput() *Error {
	if len(r.Output) > 0 && !fastjson.Valid(r.Output) {
		return invalidArg("output", "not valid JSON")
	}
	return nil
}

// ValidateProposal is Validate plus the payload checks only a proposer
// runs: each task's request is a JSON object (tasks[i].request).
func (c *SubmitTasksCommand) ValidateProposal() *Error {
	if err := c.Validate(); err != nil {
		return err
	}
	return validateTasks(c.Tasks, (*NewTask).checkRequest)
}

// ValidateProposal is Validate plus the payload checks only a proposer
// runs: each result's output is JSON (results[i].output).
func (c *CompleteTasksCommand) ValidateProposal() *Error {
	if err := c.Validate(); err != nil {
		return err
	}
	for i := range c.Results {
		if err := c.Results[i].checkOutput(); err != nil {
			err.Field = fmt.Sprintf("results[%d].%s", i, err.Field)
			return err
		}
	}
	return nil
}

func (c *RedriveTasksCommand) Validate() *Error {
	if err := checkMeta(c.CommandMeta); err != nil {
		return err
	}
	if c.All == (len(c.IDs) > 0) {
		return invalidArg("ids", "give either ids or all, not both or neither")
	}
	if len(c.IDs) > MaxRedriveBatch {
		return invalidArg("ids", "%d ids exceeds the limit of %d", len(c.IDs), MaxRedriveBatch)
	}
	for i, id := range c.IDs {
		if err := checkTaskID(fmt.Sprintf("ids[%d]", i), id); err != nil {
			return err
		}
	}
	return nil
}

func (c *CollectTasksCommand) Validate() *Error {
	if err := checkMeta(c.CommandMeta); err != nil {
		return err
	}
	if c.Before.IsZero() {
		return invalidArg("before", "required")
	}
	if c.Limit < 0 {
		return invalidArg("limit", "must be >= 0")
	}
	return nil
}

// checkTaskID validates a task id: 1–128 printable bytes, no control
// characters.
func checkTaskID(field, id string) *Error {
	if err := CheckName(field, id, true); err != nil {
		return err
	}
	if len(id) > maxTaskIDBytes {
		return invalidArg(field, "longer than %d bytes", maxTaskIDBytes)
	}
	return nil
}

// checkDestination validates a destination (an endpoint name or a callback
// URL): required, bounded, no control characters.
func checkDestination(v string) *Error {
	switch {
	case v == "":
		return invalidArg("destination", "required")
	case len(v) > maxDestinationLen:
		return invalidArg("destination", "longer than %d bytes", maxDestinationLen)
	case hasControlChar(v):
		return invalidArg("destination", "contains control characters")
	}
	return nil
}

// ClipMessage makes s a message a result may store: invalid UTF-8 replaced
// (U+FFFD), then cut to MaxTaskMessageBytes on a character boundary. Cut
// inside a character, a message was invalid UTF-8: the binary codec
// refused it, JSON spelled each stray byte as a 3-byte U+FFFD, the FSM
// then refused it as too long, and the shard's flush retried that batch
// forever, writing none of its results.
func ClipMessage(s string) string {
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	if len(s) <= MaxTaskMessageBytes {
		return s
	}
	return strings.ToValidUTF8(s[:MaxTaskMessageBytes], "")
}
