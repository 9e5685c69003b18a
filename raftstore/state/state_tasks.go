package state

import (
	"encoding/json"
	"strconv"
	"time"
)

// TableTasks is the durable outbound task table (TASKS.md).
const TableTasks Table = "tasks"

// Task is one row of the task table. Request is opaque to raftstore: the
// queue decodes it (an transport.Request as JSON).
type Task struct {
	ID          string `json:"id"`
	Shard       int    `json:"shard"`
	NamespaceID string `json:"namespace_id"`
	WorkflowID  string `json:"workflow_id"`
	TaskGroup   string `json:"task_group"`
	Destination string `json:"destination"`
	// DestinationKey is the breaker destination (scheme://host of a
	// callback URL) when it differs from Destination; empty otherwise and
	// in rows written before it existed (then Destination stands in).
	DestinationKey string          `json:"destination_key,omitempty"`
	RequestID      string          `json:"request_id,omitempty"`
	Request        json.RawMessage `json:"request"`

	Status        string    `json:"status"`
	Attempts      int       `json:"attempts"`
	Blocked       int       `json:"blocked,omitempty"`
	Unexpected    int       `json:"unexpected,omitempty"`
	NextAttemptAt time.Time `json:"next_attempt_at"`
	CreatedAt     time.Time `json:"created_at"`
	// Deadline is the schedule-to-close deadline fixed at submit (zero:
	// none); a retry is never scheduled after it. ScheduleToClose is the
	// timeout it was fixed with (deadline − submit time), which a redrive
	// starts again.
	Deadline        time.Time     `json:"deadline,omitzero"`
	ScheduleToClose time.Duration `json:"schedule_to_close,omitempty"`
	// CompletedAt is set when the task became terminal.
	CompletedAt time.Time `json:"completed_at,omitzero"`
	// Message and HTTPStatus are the last answer (or error).
	Message     string          `json:"message,omitempty"`
	HTTPStatus  int             `json:"http_status,omitempty"`
	OperationID string          `json:"operation_id,omitempty"`
	Output      json.RawMessage `json:"output,omitempty"`
	// Index is the raft index of the last write to the row.
	Index uint64 `json:"index"`
	// AttemptEpoch is the shard epoch under which an attempt of the task
	// began (a start marker, TaskResult.Started) and has recorded no result
	// since; 0 when none. A new owner that finds it below its own epoch
	// knows a call may have reached the destination (queue: interrupted
	// attempts).
	AttemptEpoch uint64 `json:"attempt_epoch,omitempty"`
}

// Terminal reports whether the task reached a final status.
func (t *Task) Terminal() bool { return t.Status != TaskPending }

// IsBlocked reports whether the task waits because an open circuit breaker
// refused its last attempt: it is pending and the owner's last result for it
// was a breaker rejection (Blocked counts those since the last call; any
// call resets it). TASKS.md, "Blocked".
func (t *Task) IsBlocked() bool { return t.Status == TaskPending && t.Blocked > 0 }

// destination is the breaker destination the backlog limits count by.
func (t *Task) destination() string {
	if t.DestinationKey != "" {
		return t.DestinationKey
	}
	return t.Destination
}

func counterPending(shard int) string { return "tasks_pending/" + strconv.Itoa(shard) }

// Task returns one task by id.
func (s *State) Task(id string) (Task, bool) {
	if t := s.tasks.Load().get(id); t != nil {
		return *t, true
	}
	return Task{}, false
}

// TaskByRequestID returns the task submitted with (namespace, requestID).
func (s *State) TaskByRequestID(namespace, requestID string) (Task, bool) {
	if t := s.tasks.Load().byRequest(namespace, requestID); t != nil {
		return *t, true
	}
	return Task{}, false
}

// ScanDue returns up to limit pending tasks of shard with NextAttemptAt in
// [from, now] (from zero: from the shard's first), earliest first (ties in
// id order, which is creation order for ids from NewTaskID). Starting at
// from lets a reader with many tasks in flight skip walking past them.
// Tasks for which skip returns true are passed over and do not count; skip
// runs with the read view open and must not call back into the state.
//
// The rows are returned themselves (immutable once inserted, so safe to
// share), not copied into a new slice of values. When the walk
// went past now before reaching limit, known is true and next is the due
// time of the shard's first pending task after now (zero: none): that is
// NextTaskDue at no extra cost, which the reader needs to sleep until then
// (a separate seek was 5 % of a loaded node's CPU).
func (s *State) ScanDue(shard int, from, now time.Time, limit int, skip func(id string) bool) (due []*Task, next time.Time, known bool) {
	if limit <= 0 {
		return nil, time.Time{}, false
	}
	known = true // unless the walk stops at limit
	ascendDue(s.tasks.Load().due, shard, from, func(t *Task) bool {
		switch {
		case t.Shard != shard: // the shard's tasks ended: nothing after now
		case t.NextAttemptAt.After(now):
			next = t.NextAttemptAt
		case len(due) == limit:
			known = false
		default:
			if skip == nil || !skip(t.ID) {
				due = append(due, t)
			}
			return true
		}
		return false
	})
	return due, next, known
}

// OldestPendingTask returns the pending task of shard created first (the
// shard's ack level), walking the shard's pending tasks: O(backlog), for
// the admin's shard describe.
func (s *State) OldestPendingTask(shard int) (Task, bool) {
	var oldest *Task
	ascendDue(s.tasks.Load().due, shard, time.Time{}, func(t *Task) bool {
		if t.Shard != shard {
			return false
		}
		if oldest == nil || t.CreatedAt.Before(oldest.CreatedAt) || (t.CreatedAt.Equal(oldest.CreatedAt) && t.ID < oldest.ID) {
			oldest = t
		}
		return true
	})
	if oldest == nil {
		return Task{}, false
	}
	return *oldest, true
}

// NextTaskDue returns the earliest NextAttemptAt after `after` among the
// shard's pending tasks; ok is false when there is none.
func (s *State) NextTaskDue(shard int, after time.Time) (time.Time, bool) {
	var next time.Time
	found := false
	ascendDue(s.tasks.Load().due, shard, after.Add(time.Nanosecond), func(t *Task) bool {
		next, found = t.NextAttemptAt, t.Shard == shard
		return false
	})
	if !found {
		return time.Time{}, false
	}
	return next, true
}

// TaskBacklog returns the number of pending tasks of shard, in O(1).
func (s *State) TaskBacklog(shard int) int {
	return int(s.side.Load().counter(counterPending(shard)))
}

// DestinationBacklog returns the number of pending tasks of namespace for
// the breaker destination, in O(log n).
func (s *State) DestinationBacklog(namespace, destination string) int {
	return s.tasks.Load().destinationBacklog(namespace, destination)
}

// PendingTasks returns the number of pending tasks of the whole table, in
// O(1).
func (s *State) PendingTasks() int { return s.tasks.Load().pendingTotal }

// RequestResult returns the result this replica remembers for a write
// proposed with request id — the answer a retry with the id gets, its Index
// the entry that produced it — and false when it remembers none (never
// seen, or forgotten). Value is shared with the state: read it only.
func (s *State) RequestResult(id string) (ApplyResult, bool) {
	r, ok := s.side.Load().remembered(id)
	if !ok {
		return ApplyResult{}, false
	}
	return r.Result, true
}

// TaskQuery selects tasks for a listing.
type TaskQuery struct {
	// Shard, if not nil, keeps only that shard's tasks.
	Shard *int
	// Status, if not empty, keeps only tasks with that status, or with
	// TaskStatusBlocked the pending tasks that are blocked (Task.IsBlocked).
	Status string
	// After, if not empty, starts after this task id (the previous page's
	// last id).
	After string
	// Limit bounds the answer (required, > 0).
	Limit int
}

// MaxTaskScan bounds how many rows one listing examines, so a filter that
// matches little cannot turn a listing into a table scan.
const MaxTaskScan = 100_000

// taskScanBudget is MaxTaskScan; tests lower it.
var taskScanBudget = MaxTaskScan

// ListTasks returns tasks in id order matching q. A failed or dlq status
// uses the status index; otherwise the id index is scanned with the
// filters applied, at most MaxTaskScan rows.
func (s *State) ListTasks(q TaskQuery) []Task {
	out, _ := s.ListTasksPage(q)
	return out
}

// ListTasksPage is ListTasks with the cursor of the next page: the last
// task's id when the page is full, or the last id examined when the scan
// budget (MaxTaskScan) ran out first, so a sparse filter pages on instead
// of ending early. next is empty when there is nothing more.
func (s *State) ListTasksPage(q TaskQuery) (out []Task, next string) {
	if q.Limit <= 0 {
		return nil, ""
	}
	tt := s.tasks.Load()
	tr, pivot := tt.byID, &Task{ID: q.After}
	byStatus := statusIndexed(q.Status)
	if byStatus {
		tr, pivot = tt.status, &Task{Status: q.Status, ID: q.After}
	}
	n, last, full := 0, "", false
	ascend(tr, pivot, func(t *Task) bool {
		if len(out) == q.Limit {
			next, full = out[len(out)-1].ID, true
			return false
		}
		if n == taskScanBudget {
			next, full = last, true
			return false
		}
		n++
		last = t.ID
		if byStatus && t.Status != q.Status {
			return false // past the status's run in the index
		}
		if t.ID == q.After || !q.matchStatus(t) || (q.Shard != nil && t.Shard != *q.Shard) {
			return true
		}
		out = append(out, *t)
		return true
	})
	if full {
		return out, next
	}
	return out, ""
}

// TaskStatusBlocked selects, in a TaskQuery, the pending tasks an open
// breaker refused (Task.IsBlocked). It is not a stored status.
const TaskStatusBlocked = "blocked"

func (q *TaskQuery) matchStatus(t *Task) bool {
	switch q.Status {
	case "":
		return true
	case TaskStatusBlocked:
		return t.IsBlocked()
	}
	return t.Status == q.Status
}

// MaxBlockedScan bounds how many rows one ScanBlocked call examines. The
// queue's release walk (a breaker closed: its blocked tasks are due now)
// reads under its shard's mutex, and a key with few blocked tasks among a
// large backlog walked the whole shard in one call: 72 ns a row, 0.45 ms
// of a 6,250-task shard under that mutex per close. 1,024 rows are about
// 75 µs; the walk resumes from the last row examined.
const MaxBlockedScan = 1024

// blockedScanBudget is MaxBlockedScan; tests lower it.
var blockedScanBudget = MaxBlockedScan

// ScanBlocked returns up to limit pending tasks of shard that a breaker
// refused (Task.IsBlocked) and for which match returns true, in due order
// after the row (afterAt, afterID) (zero: from the shard's first). Tasks
// for which skip returns true are passed over. It examines at most
// MaxBlockedScan rows: (nextAt, nextID) is where the next call resumes —
// the last task returned, or the last row examined when the budget ran
// out first (then fewer than limit tasks come back, done false; zero when
// nothing was examined). done is true when the walk reached the shard's
// end. match and skip run with the read view open and must not call back
// into the state. A whole walk is O(shard backlog after the start), for
// the rare breaker close (queue's release of a closed key's tasks).
func (s *State) ScanBlocked(shard int, afterAt time.Time, afterID string, limit int,
	match func(*Task) bool, skip func(id string) bool) (out []*Task, nextAt time.Time, nextID string, done bool) {
	out, last, done := s.scanPending(shard, afterAt, afterID, time.Time{}, limit, blockedScanBudget,
		func(t *Task) bool { return t.IsBlocked() && match(t) }, skip)
	if last != nil {
		nextAt, nextID = last.NextAttemptAt, last.ID
	}
	return out, nextAt, nextID, done
}

// ScanPending returns up to limit pending tasks of shard for which match
// returns true, in due order after the row (afterAt, afterID) (zero: from
// the shard's first) and due no later than until (zero: no bound). Tasks
// for which skip returns true are passed over. done is true when the walk
// reached the shard's end or went past until. match and skip run with the
// read view open and must not call back into the state. It walks every
// pending task of the shard in the range, matched or not.
func (s *State) ScanPending(shard int, afterAt time.Time, afterID string, until time.Time, limit int,
	match func(*Task) bool, skip func(id string) bool) (out []*Task, done bool) {
	out, _, done = s.scanPending(shard, afterAt, afterID, until, limit, 0, match, skip)
	return out, done
}

// scanPending is ScanPending examining at most rows rows (0: no bound; the
// row at the start position is not counted, so every call moves on); last
// is the last row examined.
func (s *State) scanPending(shard int, afterAt time.Time, afterID string, until time.Time, limit, rows int,
	match func(*Task) bool, skip func(id string) bool) (out []*Task, last *Task, done bool) {
	if limit <= 0 {
		return nil, nil, false
	}
	done = true
	n := 0
	pivot := &Task{Shard: shard, NextAttemptAt: afterAt, ID: afterID}
	ascend(s.tasks.Load().due, pivot, func(t *Task) bool {
		if t.Shard != shard || (!until.IsZero() && t.NextAttemptAt.After(until)) {
			return false
		}
		if !lessTaskDue(pivot, t) && afterID != "" {
			return true // the pivot row itself
		}
		if len(out) == limit || (rows > 0 && n == rows) {
			done = false
			return false
		}
		n++
		last = t
		if match(t) && (skip == nil || !skip(t.ID)) {
			out = append(out, t)
		}
		return true
	})
	return out, last, done
}

// TaskStatusCounts is the number of tasks by status (a full scan: for
// summaries of a parsed snapshot, not for serving).
func (s *State) TaskStatusCounts() map[string]int {
	out := map[string]int{}
	s.tasks.Load().byID.Scan(func(t *Task) bool {
		out[t.Status]++
		return true
	})
	return out
}
