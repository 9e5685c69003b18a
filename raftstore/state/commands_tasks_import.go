package state

import (
	"time"
)

// import_tasks (23) inserts pending tasks moved from another cluster
// (POST /v1/tasks:import, `fusebox admin tasks import`), each with its own
// id, attempts, next attempt, creation time and deadline. It is what
// pgstore.Store.Import does on PostgreSQL, so a move works in every
// direction: embedded → PostgreSQL, PostgreSQL → embedded, and between two
// embedded clusters (a new cluster with another shard count, say).
//
// Unlike a submit it is idempotent by id as well as by (namespace, request
// id): a task whose id is already stored is a duplicate naming it, not a
// conflict, so an import run twice (or resumed after a failure) adds
// nothing, even after the first run's tasks were delivered, for as long as
// the terminal rows are kept. Backlog limits do not apply: the tasks were
// accepted once already. JSON payload: the command is rare, and its rows
// are what a submit's are plus three fields.

// MsgImportTasks inserts moved pending tasks with their ids and counters.
const MsgImportTasks MessageType = 23

// MaxImportAttempts bounds an imported task's attempt count.
const MaxImportAttempts = 1 << 20

// ImportedTask is one pending task moved from another cluster: a submit's
// task with the id and deadline kept from the export (and no backlog
// limits), plus the attempts it has made, when it is next due and when it
// was created. The API builds it (api.ImportedTask), the Raft store
// proposes it in an ImportTasksCommand and the PostgreSQL store inserts it
// (pgstore.Imported): one struct, not a copy per package.
type ImportedTask struct {
	NewTask
	Attempts      int       `json:"attempts,omitempty"`
	NextAttemptAt time.Time `json:"next_attempt_at"`
	CreatedAt     time.Time `json:"created_at"`
}

// ImportTasksCommand is a batch of imported tasks. Its result is one
// SubmitOutcome per task, in order: accepted, or a duplicate naming the
// stored task.
type ImportTasksCommand struct {
	CommandMeta
	Tasks []ImportedTask `json:"tasks"`
}

// Validate checks what the FSM would refuse, before proposing.
func (c *ImportTasksCommand) Validate() *Error {
	if err := checkMeta(c.CommandMeta); err != nil {
		return err
	}
	return validateTasks(c.Tasks, (*ImportedTask).Validate)
}

// ValidateProposal is Validate plus the payload check only a proposer
// runs: each task's request is a JSON object (tasks[i].request).
func (c *ImportTasksCommand) ValidateProposal() *Error {
	if err := c.Validate(); err != nil {
		return err
	}
	return validateTasks(c.Tasks, (*ImportedTask).checkRequest)
}

// Validate checks one imported task: its task as a submit's, and the
// counters it brings.
func (t *ImportedTask) Validate() *Error {
	if err := t.NewTask.Validate(); err != nil {
		return err
	}
	switch {
	case t.Attempts < 0 || t.Attempts > MaxImportAttempts:
		return invalidArg("attempts", "must be in [0, %d], got %d", MaxImportAttempts, t.Attempts)
	case t.CreatedAt.IsZero():
		return invalidArg("created_at", "required")
	case t.NextAttemptAt.IsZero():
		return invalidArg("next_attempt_at", "required")
	}
	return nil
}

func applyImportTasks(w *writer, payload []byte) (any, *Error) {
	var c ImportTasksCommand
	if err := DecodePayload(payload, &c); err != nil {
		return nil, err
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	count, err := taskShardCount(w)
	if err != nil {
		return nil, err
	}
	out := make(submitOutcomes, len(c.Tasks))
	pendingOf := pendingCounts{}
	for i := range c.Tasks {
		it := &c.Tasks[i]
		if err := checkShard(i, &it.NewTask, count); err != nil {
			return nil, err
		}
		if t := w.tasks.lookup(it.ID); t != nil {
			out[i] = SubmitOutcome{TaskID: t.ID, Shard: t.Shard, Outcome: SubmitDuplicate}
			continue
		}
		if dup, ok := storedRequest(w, &it.NewTask); ok {
			out[i] = dup
			continue
		}
		t := it.pendingRow(it.CreatedAt, w.index)
		t.Attempts, t.NextAttemptAt = it.Attempts, it.NextAttemptAt
		t.ScheduleToClose = max(t.ScheduleToClose, 0) // as pgstore keeps it
		w.tasks.put(nil, t)
		pendingOf[it.Shard] = pendingOf.get(w, it.Shard) + 1
		out[i] = SubmitOutcome{TaskID: t.ID, Shard: t.Shard, Outcome: SubmitAccepted}
	}
	if err := pendingOf.write(w); err != nil {
		return nil, err
	}
	return out, nil
}
