package state

import (
	"errors"
	"fmt"
	"time"

	"fusebox/shardmap"
)

// Apply functions of the task family. Like every apply function they read
// time only from the command and write nothing when they return an error.

func applySubmitTasks(w *writer, payload []byte) (any, *Error) {
	var c SubmitTasksCommand
	if err := DecodePayload(payload, &c); err != nil {
		return nil, err
	}
	return submitTasks(w, &c)
}

// submitTasks applies a decoded submit (either encoding).
func submitTasks(w *writer, c *SubmitTasksCommand) (any, *Error) {
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
		nt := &c.Tasks[i]
		if err := checkShard(i, nt, count); err != nil {
			return nil, err
		}
		if dup, ok := storedRequest(w, nt); ok {
			out[i] = dup
			continue
		}
		if w.tasks.lookup(nt.ID) != nil {
			return nil, conflict(fmt.Sprintf("tasks[%d].id", i), "task id %q already exists", nt.ID)
		}
		pending := pendingOf.get(w, nt.Shard)
		if reason := overloadOf(w.tasks, c, nt, pending); reason != "" {
			out[i] = SubmitOutcome{TaskID: nt.ID, Shard: nt.Shard, Outcome: SubmitOverloaded, Reason: reason}
			continue
		}
		t := nt.pendingRow(c.At, w.index)
		w.tasks.put(nil, t)
		pendingOf[nt.Shard] = pending + 1
		out[i] = SubmitOutcome{TaskID: t.ID, Shard: t.Shard, Outcome: SubmitAccepted}
	}
	if err := pendingOf.write(w); err != nil {
		return nil, err
	}
	return out, nil
}

// taskShardCount is the shard count a task write needs, or a conflict
// while it is not set.
func taskShardCount(w *writer) (int, *Error) {
	if r := w.meta(metaShardCount); r != nil && r.ShardCount > 0 {
		return r.ShardCount, nil
	}
	return 0, conflict("shard", "the shard count is not set yet")
}

// pendingCounts are the pending counters of the shards a batch touches,
// read once and written once at the end: a counter row per task was 4% of
// a loaded node's CPU (each write a radix-tree insert).
type pendingCounts map[int]uint64

// get is shard's count, read from w the first time.
func (p pendingCounts) get(w *writer, shard int) uint64 {
	n, ok := p[shard]
	if !ok {
		n = w.counter(counterPending(shard))
		p[shard] = n
	}
	return n
}

// write stores every count read (and updated) into w.
func (p pendingCounts) write(w *writer) *Error {
	for shard, n := range p {
		if err := w.setCounter(counterPending(shard), n); err != nil {
			return err
		}
	}
	return nil
}

// overloadOf says which limit refuses nt, or "". Every input is in the log
// (the limits in the command, the counts derived from the replicated
// rows), so every replica decides alike. The counts include the tasks of
// this batch inserted before nt.
func overloadOf(tt *taskTable, c *SubmitTasksCommand, nt *NewTask, shardPending uint64) string {
	switch {
	case c.MaxShardBacklog > 0 && shardPending >= uint64(c.MaxShardBacklog):
		return OverloadShard // a retired limit, kept for old log entries
	case nt.MaxDestinationBacklog > 0 && tt.destinationBacklog(nt.NamespaceID, nt.destination()) >= nt.MaxDestinationBacklog:
		return OverloadDestination
	case nt.MaxPendingTasks > 0 && tt.pendingTotal >= nt.MaxPendingTasks:
		return OverloadPending
	}
	return ""
}

// pendingRow is the pending row nt becomes: created and due at at, written
// at raft index index.
func (nt *NewTask) pendingRow(at time.Time, index uint64) *Task {
	t := &Task{
		ID: nt.ID, Shard: nt.Shard, NamespaceID: nt.NamespaceID, WorkflowID: nt.WorkflowID,
		TaskGroup: nt.TaskGroup, Destination: nt.Destination, RequestID: nt.RequestID, Request: nt.Request,
		Status: TaskPending, NextAttemptAt: at, CreatedAt: at, Index: index,
	}
	if nt.DestinationKey != nt.Destination {
		t.DestinationKey = nt.DestinationKey
	}
	if !nt.Deadline.IsZero() {
		// The timeout it was fixed with, which a redrive starts again.
		t.Deadline, t.ScheduleToClose = nt.Deadline, nt.Deadline.Sub(at)
	}
	return t
}

// destination is the breaker destination nt counts against.
func (nt *NewTask) destination() string {
	if nt.DestinationKey != "" {
		return nt.DestinationKey
	}
	return nt.Destination
}

func applyCompleteTasks(w *writer, payload []byte) (any, *Error) {
	var c CompleteTasksCommand
	if err := DecodePayload(payload, &c); err != nil {
		return nil, err
	}
	return completeTasks(w, &c)
}

// completeTasks applies a decoded complete (either encoding).
func completeTasks(w *writer, c *CompleteTasksCommand) (any, *Error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if err := w.checkShardEpoch(c.Shard, c.Node, c.Epoch); err != nil {
		var woe *shardmap.WrongOwnerError
		if errors.As(err, &woe) {
			// Not an error result: the refusal is an answer the owner acts
			// on, and it carries the current assignment.
			return CompleteOutcome{Refused: &RefusedShard{Shard: woe.Shard, Owner: woe.Owner, Epoch: woe.Epoch}}, nil
		}
		return nil, invalidArg("shard", "%v", err)
	}
	var out CompleteOutcome
	pending := w.counter(counterPending(c.Shard))
	for _, r := range c.Results {
		o := w.tasks.lookup(r.TaskID)
		if o == nil || o.Shard != c.Shard || o.Terminal() {
			out.Ignored++
			continue
		}
		t := r.Apply(*o) // rows are immutable once inserted: a copy, then replace
		if r.Started {
			t.AttemptEpoch = c.Epoch
		} else if r.Status != TaskPending {
			t.CompletedAt = c.At
			if pending > 0 {
				pending--
			}
		}
		t.Index = w.index
		w.tasks.put(o, &t)
		out.Applied++
	}
	if err := w.setCounter(counterPending(c.Shard), pending); err != nil {
		return nil, err
	}
	return out, nil
}

func applyRedriveTasks(w *writer, payload []byte) (any, *Error) {
	var c RedriveTasksCommand
	if err := DecodePayload(payload, &c); err != nil {
		return nil, err
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	var rows []*Task
	out := RedriveOutcome{Redriven: []string{}}
	if c.All {
		ascend(w.tasks.status, &Task{Status: TaskDLQ}, func(t *Task) bool {
			if t.Status != TaskDLQ {
				return false
			}
			if len(rows) == MaxRedriveBatch {
				out.More = true
				return false
			}
			rows = append(rows, t)
			return true
		})
	} else {
		seen := make(map[string]bool, len(c.IDs))
		for _, id := range c.IDs {
			if t := w.tasks.lookup(id); t != nil && t.Status == TaskDLQ && !seen[id] {
				seen[id] = true
				rows = append(rows, t)
			}
		}
	}
	// Rows are gathered first: the writes below must not run under an open
	// iterator.
	for _, o := range rows {
		t := *o
		t.Status, t.Attempts, t.Blocked, t.Unexpected = TaskPending, 0, 0, 0
		t.NextAttemptAt, t.CompletedAt, t.Index = c.At, time.Time{}, w.index
		if !t.Deadline.IsZero() { // a redrive starts the schedule-to-close timeout again
			t.Deadline = c.At.Add(t.ScheduleToClose)
		}
		w.tasks.put(o, &t)
		if err := w.setCounter(counterPending(t.Shard), w.counter(counterPending(t.Shard))+1); err != nil {
			return nil, err
		}
		out.Redriven = append(out.Redriven, t.ID)
	}
	return out, nil
}

func applyCollectTasks(w *writer, payload []byte) (any, *Error) {
	var c CollectTasksCommand
	if err := DecodePayload(payload, &c); err != nil {
		return nil, err
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	limit := c.Limit
	if limit <= 0 || limit > MaxCollectBatch {
		limit = MaxCollectBatch
	}
	var victims []*Task
	var out CollectOutcome
	ascend(w.tasks.terminal, nil, func(t *Task) bool {
		if !t.CompletedAt.Before(c.Before) {
			return false
		}
		if len(victims) == limit {
			out.More = true
			return false
		}
		victims = append(victims, t)
		return true
	})
	for _, t := range victims {
		w.tasks.remove(t)
	}
	out.Deleted = len(victims)
	return out, nil
}

func (w *writer) counter(name string) uint64 { return w.it.counter(name) }

func (w *writer) setCounter(name string, v uint64) *Error {
	w.it.setCounter(name, v)
	return nil
}

// checkShard refuses task i of a command unless its shard is the one
// ShardOf gives it among count shards.
func checkShard(i int, nt *NewTask, count int) *Error {
	if nt.Shard >= count {
		return invalidArg(fmt.Sprintf("tasks[%d].shard", i), "shard %d out of range [0, %d)", nt.Shard, count)
	}
	if want := shardmap.ShardOf(nt.NamespaceID, nt.WorkflowID, count); nt.Shard != want {
		return invalidArg(fmt.Sprintf("tasks[%d].shard", i), "shard %d is not ShardOf(namespace_id, workflow_id) = %d", nt.Shard, want)
	}
	return nil
}

// storedRequest is the duplicate outcome naming the stored task with nt's
// (namespace, request id), if there is one.
func storedRequest(w *writer, nt *NewTask) (SubmitOutcome, bool) {
	if nt.RequestID == "" {
		return SubmitOutcome{}, false
	}
	t := w.tasks.byRequest(nt.NamespaceID, nt.RequestID)
	if t == nil {
		return SubmitOutcome{}, false
	}
	return SubmitOutcome{TaskID: t.ID, Shard: t.Shard, Outcome: SubmitDuplicate}, true
}
