package node

import (
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"time"

	"fusebox/api"
	"fusebox/breakerpool"
	"fusebox/dynconfig"
	"fusebox/queue"
	"fusebox/raftstore"
	"fusebox/raftstore/state"
	"fusebox/transport"
)

// TaskStore is queue.Store over the replicated task table: reads are local
// (every node has the whole table), Complete is one epoch-fenced Raft write
// per batch, signed with this node's id.
type TaskStore struct {
	store *raftstore.Store // Complete
	tasks taskTable        // every read: the local replica
	node  string
}

// taskTable is what the queue's store reads of the replicated task table
// (raftstore/state.State, through raftstore.Store.Reader).
type taskTable interface {
	ScanDue(shard int, from, now time.Time, limit int, skip func(id string) bool) ([]*state.Task, time.Time, bool)
	NextTaskDue(shard int, after time.Time) (time.Time, bool)
	TaskBacklog(shard int) int
	Subscribe(table state.Table) (<-chan struct{}, func())
	SubscribeShard(shard int) (<-chan struct{}, func())
	ScanBlocked(shard int, afterAt time.Time, afterID string, limit int, match func(*state.Task) bool, skip func(id string) bool) ([]*state.Task, time.Time, string, bool)
	ScanPending(shard int, afterAt time.Time, afterID string, until time.Time, limit int, match func(*state.Task) bool, skip func(id string) bool) ([]*state.Task, bool)
	TakeDueLow(shard int) (time.Time, bool)
}

var (
	_ queue.Store           = (*TaskStore)(nil)
	_ queue.ShardSubscriber = (*TaskStore)(nil)
	_ queue.DueLowStore     = (*TaskStore)(nil)
)

// NewTaskStore returns the queue's view of store for node nodeID.
func NewTaskStore(store *raftstore.Store, nodeID string) *TaskStore {
	return &TaskStore{store: store, tasks: store.Reader(), node: nodeID}
}

// Due implements queue.Store.
func (s *TaskStore) Due(shard int, from, now time.Time, limit int, skip func(id string) bool) ([]queue.Task, time.Time, bool) {
	rows, next, known := s.tasks.ScanDue(shard, from, now, limit, skip)
	out := make([]queue.Task, len(rows))
	for i, t := range rows {
		out[i] = *t
	}
	return out, next, known
}

// NextDue implements queue.Store.
func (s *TaskStore) NextDue(shard int, after time.Time) (time.Time, bool) {
	return s.tasks.NextTaskDue(shard, after)
}

// Backlog implements queue.Store.
func (s *TaskStore) Backlog(shard int) int { return s.tasks.TaskBacklog(shard) }

// Subscribe implements queue.Store: it wakes after any change to the task
// table (or a snapshot restore).
func (s *TaskStore) Subscribe() (<-chan struct{}, func()) {
	return s.tasks.Subscribe(state.TableTasks)
}

// SubscribeShard implements queue.ShardSubscriber: it wakes after a
// change that put a task of shard into the due order (or a snapshot
// restore), so a submit wakes its shard's reader, not every reader.
func (s *TaskStore) SubscribeShard(shard int) (<-chan struct{}, func()) {
	return s.tasks.SubscribeShard(shard)
}

// TakeDueLow implements queue.DueLowStore: this replica records the tasks
// its applies put into a shard's due order (state.TakeDueLow).
func (s *TaskStore) TakeDueLow(shard int) (time.Time, bool) {
	return s.tasks.TakeDueLow(shard)
}

// Complete implements queue.Store. A stale epoch comes back as a
// *shardmap.WrongOwnerError (errors.As works); the request id of the write
// makes raftstore's retries of an ambiguous apply safe.
func (s *TaskStore) Complete(ctx context.Context, shard int, epoch uint64, results []queue.Result) error {
	if len(results) == 0 {
		return nil
	}
	rs := slices.Clone(results) // the caller's results stay as they are
	for i := range rs {
		rs[i].Message = state.ClipMessage(rs[i].Message)
	}
	_, err := s.store.CompleteTasks(ctx, state.CompleteTasksCommand{Shard: shard, Epoch: epoch, Node: s.node, Results: rs})
	return err
}

// TaskAPI is the API's api.TaskService: the store plus the live
// backlog limits from dynamic config and the data dir's free space.
type TaskAPI struct {
	*raftstore.Store
	*state.State // the reads (api.TaskReader): Store.Reader()
	config       *dynconfig.Collection
	disk         *dataDirSpace // nil: no free-space floor
	// Policy checks destinations at submit and endpoint PUT; nil allows
	// all (destinations.go).
	Policy *transport.Policy
}

var _ api.TaskService = (*TaskAPI)(nil)

// NewTaskAPI returns the task service the API serves.
func NewTaskAPI(store *raftstore.Store, config *dynconfig.Collection) *TaskAPI {
	a := &TaskAPI{Store: store, config: config}
	if store != nil {
		a.State = store.Reader()
	}
	return a
}

// newTaskAPI is the node's task service on its task store (with
// --task-store postgres, pgTaskAPI over it): its data dir's free space is
// checked against fusebox.tasks.minFreeDiskMB and exported as a metric.
func (n *Node) newTaskAPI(policy *transport.Policy) api.TaskService {
	disk := newDataDirSpace(n.cfg.DataDir)
	if err := disk.register(n.reg); err != nil {
		n.log.Warn("data dir free-space metric not registered", "err", err)
	}
	api := &TaskAPI{Store: n.store, State: n.store.Reader(), config: n.config, disk: disk, Policy: policy}
	if n.pg != nil {
		return pgTaskAPI{TaskAPI: api, pg: n.pg}
	}
	return api
}

// SubmitLimits are fusebox.tasks.maxDestinationBacklog for (namespace,
// destination), most specific wins, and fusebox.tasks.maxPendingTasks; 0:
// no limit. fusebox.tasks.maxShardBacklog is retired (no effect).
func (a *TaskAPI) SubmitLimits(namespace, destination string) (perDestination, pending int) {
	return lookupIntFor(a.config, dynconfig.KeyTaskMaxDestinationBacklog, namespace, destination, dynconfig.DefaultTaskMaxDestinationBacklog),
		lookupInt(a.config, dynconfig.KeyTaskMaxPendingTasks, dynconfig.DefaultTaskMaxPendingTasks)
}

// DataDirSpace is the data dir's free space and fusebox.tasks.minFreeDiskMB
// in bytes; an unreadable free space reports no floor.
func (a *TaskAPI) DataDirSpace() (free, floor uint64) {
	if a.disk == nil {
		return 0, 0
	}
	free, ok := a.disk.Free()
	if !ok {
		return 0, 0
	}
	return free, minFreeDiskBytes(a.config)
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
	return lookupIntFor(config, key, "", "", def)
}

// lookupIntFor is an int key for (namespace, destination), most specific
// wins.
func lookupIntFor(config *dynconfig.Collection, key, namespace, destination string, def int) int {
	if config == nil {
		return def
	}
	raw, _, ok := config.Current().Lookup(key, namespace, destination)
	if !ok {
		return def
	}
	n, err := strconv.Atoi(string(raw))
	if err != nil {
		return def
	}
	return n
}

var (
	_ queue.BlockedStore = (*TaskStore)(nil)
	_ queue.LaterStore   = (*TaskStore)(nil)
)

// Blocked implements queue.BlockedStore over state.State.ScanBlocked,
// whose row budget (state.MaxBlockedScan) may end a page short: last is
// then the last row it examined.
func (s *TaskStore) Blocked(shard int, k breakerpool.Key, after queue.Cursor, limit int, skip func(string) bool) ([]queue.Task, queue.Cursor, bool) {
	rows, nextAt, nextID, done := s.tasks.ScanBlocked(shard, after.At, after.ID, limit, keyMatch(k), skip)
	out, _, _ := cursorPage(rows, done)
	return out, queue.Cursor{At: nextAt, ID: nextID}, done
}

// Later implements queue.LaterStore over state.State.ScanPending.
func (s *TaskStore) Later(shard int, k breakerpool.Key, after queue.Cursor, until time.Time, limit int, skip func(string) bool) ([]queue.Task, queue.Cursor, bool) {
	rows, done := s.tasks.ScanPending(shard, after.At, after.ID, until, limit, keyMatch(k), skip)
	return cursorPage(rows, done)
}

// keyMatch matches rows to k by task group, namespace and breaker
// destination (the row's DestinationKey, or, for a row written before keys
// were stored, the one derived from its destination).
func keyMatch(k breakerpool.Key) func(t *state.Task) bool {
	return func(t *state.Task) bool {
		if t.TaskGroup != k.TaskGroup || t.NamespaceID != k.NamespaceID {
			return false
		}
		d := t.DestinationKey
		if d == "" {
			d = transport.BreakerDestination(t.TaskGroup, t.Destination)
		}
		return d == k.Destination
	}
}

// cursorPage copies a walk's rows out, with the position of the last.
func cursorPage(rows []*state.Task, done bool) ([]queue.Task, queue.Cursor, bool) {
	out := make([]queue.Task, len(rows))
	var last queue.Cursor
	for i, t := range rows {
		out[i] = *t
		last = queue.Cursor{At: t.NextAttemptAt, ID: t.ID}
	}
	return out, last, done
}

// ScheduleToClose resolves a submitted task's schedule-to-close timeout
// (transport's scheduleToCloser): the one asked for, else
// fusebox.tasks.defaultScheduleToCloseTimeout, capped for Nexus tasks by
// component.nexusoperations.limit.scheduleToCloseTimeout. 0: no deadline.
func (a *TaskAPI) ScheduleToClose(taskGroup, namespace, destination string, requested time.Duration) time.Duration {
	if a.config == nil {
		return requested
	}
	return a.config.Current().ScheduleToClose(taskGroup, namespace, destination, requested)
}
