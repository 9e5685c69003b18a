package node

import (
	"context"
	"testing"
	"time"

	"fusebox/raftstore"
	"fusebox/raftstore/raftstoretest"
	"fusebox/raftstore/state"
	"fusebox/shardmap"
	"fusebox/taskstore/storetest"
)

// suiteStore is the raft store as storetest drives it.
type suiteStore struct {
	*TaskStore
	rs *raftstore.Store
}

func (s suiteStore) Submit(ctx context.Context, tasks []state.NewTask, at time.Time) ([]state.SubmitOutcome, error) {
	out, idx, err := s.rs.SubmitTasks(ctx, state.SubmitTasksCommand{CommandMeta: state.CommandMeta{At: at}, Tasks: tasks})
	if err != nil {
		return nil, err
	}
	return out, s.rs.WaitForApplied(ctx, idx)
}

func (s suiteStore) Task(_ context.Context, id string) (state.Task, bool, error) {
	t, ok := s.rs.Reader().Task(id)
	return t, ok, nil
}

func (s suiteStore) ListTasksPage(_ context.Context, q state.TaskQuery) ([]state.Task, string, error) {
	out, next := s.rs.Reader().ListTasksPage(q)
	return out, next, nil
}

func (s suiteStore) Redrive(ctx context.Context, ids []string, all bool, at time.Time) (state.RedriveOutcome, error) {
	return s.rs.RedriveTasks(ctx, state.RedriveTasksCommand{CommandMeta: state.CommandMeta{At: at}, IDs: ids, All: all})
}

func (s suiteStore) DestinationBacklog(_ context.Context, namespace, destination string) int {
	return s.rs.Reader().DestinationBacklog(namespace, destination)
}

func (s suiteStore) PendingTasks(context.Context) int { return s.rs.Reader().PendingTasks() }

func (s suiteStore) ShardStats(_ context.Context, shard int) (int, time.Time, error) {
	var oldest time.Time
	if t, ok := s.rs.Reader().OldestPendingTask(shard); ok {
		oldest = t.CreatedAt
	}
	return s.rs.Reader().TaskBacklog(shard), oldest, nil
}

func (s suiteStore) Collect(ctx context.Context, before time.Time, limit int) (int, bool, error) {
	out, err := s.rs.CollectTasks(ctx, state.CollectTasksCommand{Before: before, Limit: limit})
	return out.Deleted, out.More, err
}

// TestRaftStoreSuite runs the shared task-store suite against the raft
// store (the postgres store runs it in taskstore/pgstore).
func TestRaftStoreSuite(t *testing.T) {
	storetest.Run(t, func(t *testing.T) storetest.Harness {
		const shards = 8
		rs := raftstoretest.SingleNode(t, "n1", shards)
		return storetest.Harness{
			Store: suiteStore{NewTaskStore(rs, "n1"), rs}, Shards: shards,
			As:    func(node string) storetest.Store { return suiteStore{NewTaskStore(rs, node), rs} },
			Epoch: func(shard int) uint64 { return rs.Reader().ShardMap().Shards[shard].Epoch },
			Take: func(t *testing.T, shard int, node string) uint64 {
				cur := rs.Reader().ShardMap()
				m := &shardmap.Map{Version: cur.Version + 1, NumShards: cur.NumShards, Shards: append([]shardmap.Assignment(nil), cur.Shards...)}
				m.Shards[shard].Owner = node
				m.Shards[shard].Epoch++
				idx, err := rs.CommitShardMap(t.Context(), state.CommitShardMapCommand{PrevVersion: cur.Version, Map: m})
				if err != nil {
					t.Fatal(err)
				}
				if err := rs.WaitForApplied(t.Context(), idx); err != nil {
					t.Fatal(err)
				}
				return m.Shards[shard].Epoch
			},
		}
	})
}
