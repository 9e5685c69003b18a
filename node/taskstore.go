package node

import (
	"context"
	"encoding/json"
	"strconv"
	"time"

	"fusebox/dynconfig"
	"fusebox/queue"
	"fusebox/raftstore"
	"fusebox/transport"
	"fusebox/transport/outbound"
)

// TaskStore is queue.Store over the replicated task table: reads are local
// (every node has the whole table), Complete is one epoch-fenced Raft write
// per batch, signed with this node's id.
type TaskStore struct {
	store *raftstore.Store
	node  string
}

var _ queue.Store = (*TaskStore)(nil)

// NewTaskStore returns the queue's view of store for node nodeID.
func NewTaskStore(store *raftstore.Store, nodeID string) *TaskStore {
	return &TaskStore{store: store, node: nodeID}
}

// Due implements queue.Store.
func (s *TaskStore) Due(shard int, from, now time.Time, limit int, skip func(id string) bool) ([]queue.Task, time.Time, bool) {
	rows, next, known := s.store.ScanDue(shard, from, now, limit, skip)
	out := make([]queue.Task, len(rows))
	for i, t := range rows {
		out[i] = toQueueTask(t)
	}
	return out, next, known
}

// NextDue implements queue.Store.
func (s *TaskStore) NextDue(shard int, after time.Time) (time.Time, bool) {
	return s.store.NextTaskDue(shard, after)
}

// Backlog implements queue.Store.
func (s *TaskStore) Backlog(shard int) int { return s.store.TaskBacklog(shard) }

// Subscribe implements queue.Store: it wakes after any change to the task
// table (or a snapshot restore).
func (s *TaskStore) Subscribe() (<-chan struct{}, func()) {
	return s.store.Subscribe(raftstore.TableTasks)
}

// Complete implements queue.Store. A stale epoch comes back as a
// *shardmap.WrongOwnerError (errors.As works); the request id of the write
// makes raftstore's retries of an ambiguous apply safe.
func (s *TaskStore) Complete(ctx context.Context, shard int, epoch uint64, results []queue.Result) error {
	if len(results) == 0 {
		return nil
	}
	rs := make([]raftstore.TaskResult, len(results))
	for i, r := range results {
		rs[i] = raftstore.TaskResult{
			TaskID: r.TaskID, Status: string(r.Status), Attempts: r.Attempts, Blocked: r.Blocked, Unexpected: r.Unexpected,
			NextAttemptAt: r.NextAttemptAt, Message: truncate(r.Message, raftstore.MaxTaskMessageBytes), HTTPStatus: r.HTTPStatus,
			OperationID: r.OperationID, Output: r.Output, Started: r.Started,
		}
	}
	_, err := s.store.CompleteTasks(ctx, raftstore.CompleteTasksCommand{Shard: shard, Epoch: epoch, Node: s.node, Results: rs})
	return err
}

// toQueueTask converts a row. A request that no longer decodes (written by
// another version) is handed over with a request task group that cannot
// match, so the queue dead-letters it as poison with the reason.
func toQueueTask(t *raftstore.Task) queue.Task {
	var req outbound.Request
	if err := json.Unmarshal(t.Request, &req); err != nil {
		req = outbound.Request{TaskGroup: "undecodable request: " + truncate(err.Error(), 200)}
	}
	return queue.Task{
		ID: t.ID, Shard: t.Shard, NamespaceID: t.NamespaceID, WorkflowID: t.WorkflowID, TaskGroup: t.TaskGroup,
		Destination: t.Destination, Request: req, Attempts: t.Attempts, Blocked: t.Blocked, Unexpected: t.Unexpected,
		NextAttemptAt: t.NextAttemptAt, CreatedAt: t.CreatedAt, Status: queue.Status(t.Status),
		Message: t.Message, HTTPStatus: t.HTTPStatus, OperationID: t.OperationID, Output: t.Output,
		AttemptEpoch: t.AttemptEpoch,
	}
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}

// TaskAPI is the API's transport.TaskService: the store plus the live
// backlog limit from dynamic config.
type TaskAPI struct {
	*raftstore.Store
	config *dynconfig.Collection
	// Policy checks destinations at submit and endpoint PUT; nil allows
	// all (destinations.go).
	Policy *outbound.Policy
}

var _ transport.TaskService = (*TaskAPI)(nil)

// NewTaskAPI returns the task service the API serves.
func NewTaskAPI(store *raftstore.Store, config *dynconfig.Collection) *TaskAPI {
	return &TaskAPI{Store: store, config: config}
}

// MaxShardBacklog is fusebox.tasks.maxShardBacklog (0: no limit).
func (a *TaskAPI) MaxShardBacklog() int {
	return lookupInt(a.config, dynconfig.KeyTaskMaxShardBacklog, dynconfig.DefaultTaskMaxShardBacklog)
}

// TaskRetention returns fusebox.tasks.retention as a function for
// raftstore.Store.RunTaskCollector.
func TaskRetention(config *dynconfig.Collection) func() time.Duration {
	return func() time.Duration {
		if config == nil {
			return dynconfig.DefaultTaskRetention
		}
		raw, _, ok := config.Current().Lookup(dynconfig.KeyTaskRetention, "", "")
		var s string
		if !ok || json.Unmarshal(raw, &s) != nil {
			return dynconfig.DefaultTaskRetention
		}
		d, err := time.ParseDuration(s)
		if err != nil || d <= 0 {
			return dynconfig.DefaultTaskRetention
		}
		return d
	}
}

func lookupInt(config *dynconfig.Collection, key string, def int) int {
	if config == nil {
		return def
	}
	raw, _, ok := config.Current().Lookup(key, "", "")
	if !ok {
		return def
	}
	n, err := strconv.Atoi(string(raw))
	if err != nil {
		return def
	}
	return n
}
