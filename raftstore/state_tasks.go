package raftstore

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/hashicorp/go-memdb"
)

// TableTasks is the durable outbound task table (TASKS.md).
const TableTasks Table = "tasks"

// Task is one row of the task table. Request is opaque to raftstore: the
// queue decodes it (an outbound.Request as JSON).
type Task struct {
	ID          string          `json:"id"`
	Shard       int             `json:"shard"`
	NamespaceID string          `json:"namespace_id"`
	WorkflowID  string          `json:"workflow_id"`
	TaskGroup   string          `json:"task_group"`
	Destination string          `json:"destination"`
	RequestID   string          `json:"request_id,omitempty"`
	Request     json.RawMessage `json:"request"`

	Status        string    `json:"status"`
	Attempts      int       `json:"attempts"`
	Blocked       int       `json:"blocked,omitempty"`
	Unexpected    int       `json:"unexpected,omitempty"`
	NextAttemptAt time.Time `json:"next_attempt_at"`
	CreatedAt     time.Time `json:"created_at"`
	// CompletedAt is set when the task became terminal.
	CompletedAt time.Time `json:"completed_at,omitzero"`
	// Message and HTTPStatus are the last answer (or error).
	Message     string          `json:"message,omitempty"`
	HTTPStatus  int             `json:"http_status,omitempty"`
	OperationID string          `json:"operation_id,omitempty"`
	Output      json.RawMessage `json:"output,omitempty"`
	// Index is the raft index of the last write to the row.
	Index uint64 `json:"index"`
}

// Terminal reports whether the task reached a final status.
func (t *Task) Terminal() bool { return t.Status != TaskPending }

// Indexes of the tasks table. Every secondary index key is built by
// taskKey* below and passed to memdb pre-encoded as one []byte argument;
// memdb appends the primary key to non-unique index keys, so rows with equal
// keys iterate in id order.
const (
	idxTaskDue      = "due"      // pending only: shard, NextAttemptAt
	idxTaskRequest  = "request"  // unique, with a request id: namespace, request id
	idxTaskStatus   = "status"   // failed and dlq only: status (DLQ listing, redrive)
	idxTaskTerminal = "terminal" // succeeded/failed only: CompletedAt (collect)
)

func tasksTableSchema() *memdb.TableSchema {
	ix := func(name string, unique bool, fn func(*Task) []byte) *memdb.IndexSchema {
		return &memdb.IndexSchema{Name: name, Unique: unique, AllowMissing: true, Indexer: taskIndexer(fn)}
	}
	return &memdb.TableSchema{Name: string(TableTasks), Indexes: map[string]*memdb.IndexSchema{
		"id": {Name: "id", Unique: true, Indexer: &memdb.StringFieldIndex{Field: "ID"}},
		idxTaskDue: ix(idxTaskDue, false, func(t *Task) []byte {
			if t.Status != TaskPending {
				return nil
			}
			return taskKeyDue(t.Shard, t.NextAttemptAt)
		}),
		idxTaskRequest: ix(idxTaskRequest, true, func(t *Task) []byte {
			if t.RequestID == "" {
				return nil
			}
			return taskKeyRequest(t.NamespaceID, t.RequestID)
		}),
		// Only the rare statuses are indexed: every index costs each insert
		// and each completion a radix-tree write (the FSM apply was 20% of a
		// loaded node's CPU). Listings of pending or succeeded tasks, or of
		// one shard, scan the id index with a filter (bounded by MaxTaskScan).
		idxTaskStatus: ix(idxTaskStatus, false, func(t *Task) []byte {
			if !statusIndexed(t.Status) {
				return nil
			}
			return []byte(t.Status + "\x00")
		}),
		idxTaskTerminal: ix(idxTaskTerminal, false, func(t *Task) []byte {
			if t.Status != TaskSucceeded && t.Status != TaskFailed {
				return nil
			}
			return sortableTime(nil, t.CompletedAt)
		}),
	}}
}

// taskIndexer adapts a key function to memdb; a nil key leaves the row out
// of the index (AllowMissing).
type taskIndexer func(*Task) []byte

func (f taskIndexer) FromObject(obj any) (bool, []byte, error) {
	t, ok := obj.(*Task)
	if !ok {
		return false, nil, fmt.Errorf("task index: unexpected type %T", obj)
	}
	k := f(t)
	return k != nil, k, nil
}

func (f taskIndexer) FromArgs(args ...any) ([]byte, error) {
	if len(args) != 1 {
		return nil, fmt.Errorf("task index: want one pre-encoded key, got %d args", len(args))
	}
	b, ok := args[0].([]byte)
	if !ok {
		return nil, fmt.Errorf("task index: want []byte, got %T", args[0])
	}
	return b, nil
}

func (f taskIndexer) PrefixFromArgs(args ...any) ([]byte, error) { return f.FromArgs(args...) }

// taskKeyShard is the 4-byte big-endian shard; fixed width sorts correctly.
func taskKeyShard(shard int) []byte { return binary.BigEndian.AppendUint32(nil, uint32(shard)) }

func taskKeyDue(shard int, at time.Time) []byte { return sortableTime(taskKeyShard(shard), at) }

func taskKeyRequest(namespace, requestID string) []byte {
	return []byte(namespace + "\x00" + requestID + "\x00")
}

// sortableTime appends t as 8 bytes that sort like the time: Unix nanos
// with the sign bit flipped, big-endian.
func sortableTime(b []byte, t time.Time) []byte {
	return binary.BigEndian.AppendUint64(b, uint64(t.UnixNano())^(1<<63))
}

func counterPending(shard int) string { return "tasks_pending/" + strconv.Itoa(shard) }

// Task returns one task by id.
func (s *State) Task(id string) (Task, bool) {
	return first[Task](s.read(), string(TableTasks), id)
}

// TaskByRequestID returns the task submitted with (namespace, requestID).
func (s *State) TaskByRequestID(namespace, requestID string) (Task, bool) {
	o, err := s.read().First(string(TableTasks), idxTaskRequest, taskKeyRequest(namespace, requestID))
	if err != nil || o == nil {
		return Task{}, false
	}
	return *o.(*Task), true
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
	var (
		it  memdb.ResultIterator
		err error
	)
	if from.IsZero() {
		it, err = s.read().Get(string(TableTasks), idxTaskDue+"_prefix", taskKeyShard(shard))
	} else {
		it, err = s.read().LowerBound(string(TableTasks), idxTaskDue, taskKeyDue(shard, from))
	}
	if err != nil {
		return nil, time.Time{}, false
	}
	for o := it.Next(); ; o = it.Next() {
		if o == nil {
			return due, time.Time{}, true // the index ended: nothing after now
		}
		t := o.(*Task)
		if t.Shard != shard {
			return due, time.Time{}, true // the shard's tasks ended
		}
		if t.NextAttemptAt.After(now) {
			return due, t.NextAttemptAt, true
		}
		if len(due) == limit {
			return due, time.Time{}, false
		}
		if skip != nil && skip(t.ID) {
			continue
		}
		due = append(due, t)
	}
}

// OldestPendingTask returns the pending task of shard created first (the
// shard's ack level), walking the shard's pending tasks: O(backlog), for
// the admin's shard describe.
func (s *State) OldestPendingTask(shard int) (Task, bool) {
	it, err := s.read().Get(string(TableTasks), idxTaskDue+"_prefix", taskKeyShard(shard))
	if err != nil {
		return Task{}, false
	}
	var oldest *Task
	for o := it.Next(); o != nil; o = it.Next() {
		t := o.(*Task)
		if oldest == nil || t.CreatedAt.Before(oldest.CreatedAt) || (t.CreatedAt.Equal(oldest.CreatedAt) && t.ID < oldest.ID) {
			oldest = t
		}
	}
	if oldest == nil {
		return Task{}, false
	}
	return *oldest, true
}

// NextTaskDue returns the earliest NextAttemptAt after `after` among the
// shard's pending tasks; ok is false when there is none.
func (s *State) NextTaskDue(shard int, after time.Time) (time.Time, bool) {
	it, err := s.read().LowerBound(string(TableTasks), idxTaskDue, taskKeyDue(shard, after.Add(time.Nanosecond)))
	if err != nil {
		return time.Time{}, false
	}
	o := it.Next()
	if o == nil || o.(*Task).Shard != shard {
		return time.Time{}, false
	}
	return o.(*Task).NextAttemptAt, true
}

// TaskBacklog returns the number of pending tasks of shard, in O(1).
func (s *State) TaskBacklog(shard int) int {
	c, _ := first[counterRow](s.read(), tableCounters, counterPending(shard))
	return int(c.Value)
}

// TaskQuery selects tasks for a listing.
type TaskQuery struct {
	// Shard, if not nil, keeps only that shard's tasks.
	Shard *int
	// Status, if not empty, keeps only tasks with that status.
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

// statusIndexed reports whether tasks of status are in the status index.
func statusIndexed(status string) bool { return status == TaskDLQ || status == TaskFailed }

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
	txn := s.read()
	var (
		it     memdb.ResultIterator
		err    error
		suffix = []byte(q.After + "\x00")
	)
	byStatus := statusIndexed(q.Status)
	if byStatus {
		it, err = txn.LowerBound(string(TableTasks), idxTaskStatus, append([]byte(q.Status+"\x00"), suffix...))
	} else {
		it, err = txn.LowerBound(string(TableTasks), "id", q.After)
	}
	if err != nil {
		return nil, ""
	}
	n, last := 0, ""
	for o := it.Next(); o != nil; o = it.Next() {
		if len(out) == q.Limit {
			return out, out[len(out)-1].ID
		}
		if n == taskScanBudget {
			return out, last
		}
		n++
		t := o.(*Task)
		last = t.ID
		if byStatus && t.Status != q.Status {
			break // past the status's run in the index
		}
		if t.ID == q.After || (q.Status != "" && t.Status != q.Status) || (q.Shard != nil && t.Shard != *q.Shard) {
			continue
		}
		out = append(out, *t)
	}
	return out, ""
}
