package raftstore

import (
	"context"
	"time"

	"fusebox/raftstore/state"
	"fusebox/shardmap"
)

// Typed helpers of the task family. Like the other helpers they validate
// locally first, stamp At with this node's clock if unset, and apply from
// any node.

// SubmitTasks inserts a batch of tasks in one raft entry. It assigns each
// task its shard (shardmap.ShardOf over the cluster's shard count) and, when
// empty, its id (NewTaskID, so that ids sort in batch order). Outcomes come back in the order given; the raft
// index is for WaitForApplied. A single task without a request id is
// group-committed with other single submits in flight (submit_batch.go). A
// submit with a request id whose answer is a replay refusing some tasks
// (a retry of a 429) proposes those tasks again (submit_retry.go).
func (s *Store) SubmitTasks(ctx context.Context, c state.SubmitTasksCommand) ([]state.SubmitOutcome, uint64, error) {
	stamp(&c.CommandMeta)
	n := s.state.ShardCount()
	if n <= 0 {
		return nil, 0, unavailable("the shard count is not set yet; the cluster is still forming")
	}
	c.Tasks = append([]state.NewTask(nil), c.Tasks...)
	for i := range c.Tasks {
		t := &c.Tasks[i]
		t.Shard = shardmap.ShardOf(t.NamespaceID, t.WorkflowID, n)
		if t.ID == "" {
			t.ID = state.NewTaskID(c.At.Add(time.Duration(i))) // batch order is id order
		}
	}
	if err := c.ValidateProposal(); err != nil {
		return nil, 0, err
	}
	if len(c.Tasks) == 1 && c.RequestID == "" {
		// Group commit with other single submits (submit_batch.go).
		out, idx, err := s.submits.submit(ctx, c)
		if err != nil {
			return nil, idx, err
		}
		return []state.SubmitOutcome{out}, idx, nil
	}
	if c.RequestID != "" {
		// A retry's refused tasks are decided afresh (submit_retry.go).
		return s.submitRetrying(ctx, c)
	}
	return applySubmit(ctx, s, c)
}

// CompleteTasks applies delivery results, fenced by the shard's epoch: if
// c.Node does not own c.Shard at c.Epoch in the committed map, nothing is
// written and the error is a *shardmap.WrongOwnerError with the current
// owner and epoch. Once every server knows LogVersionCompleteMulti, a
// complete without a request id is group-committed with the completes of
// other shards in flight on this node (complete_batch.go), each fenced by
// its own epoch.
func (s *Store) CompleteTasks(ctx context.Context, c state.CompleteTasksCommand) (state.CompleteOutcome, error) {
	stamp(&c.CommandMeta)
	if err := c.ValidateProposal(); err != nil {
		return state.CompleteOutcome{}, err
	}
	var out state.CompleteOutcome
	var idx uint64
	var err error
	if c.RequestID == "" && s.clusterKnows(state.LogVersionCompleteMulti) {
		// Group commit with the completes of other shards (complete_batch.go).
		out, idx, err = s.completes.complete(ctx, c)
	} else {
		out, idx, err = applyComplete(ctx, s, c)
	}
	if err != nil {
		return state.CompleteOutcome{}, err
	}
	// The caller's next read of the task table is local: wait until this
	// replica has applied the write, or a follower's reader would find the
	// task still pending and dispatch it again.
	if err := s.WaitForApplied(ctx, idx); err != nil {
		return out, err
	}
	if r := out.Refused; r != nil {
		return out, &shardmap.WrongOwnerError{Shard: r.Shard, Owner: r.Owner, Epoch: r.Epoch}
	}
	return out, nil
}

// RedriveTasks moves dead-lettered tasks back to pending.
func (s *Store) RedriveTasks(ctx context.Context, c state.RedriveTasksCommand) (state.RedriveOutcome, error) {
	stamp(&c.CommandMeta)
	if err := c.Validate(); err != nil {
		return state.RedriveOutcome{}, err
	}
	out, _, err := applyTyped[state.RedriveOutcome](ctx, s, state.MsgRedriveTasks, c, c.RequestID)
	return out, err
}

// CollectTasks deletes succeeded and failed tasks completed before c.Before,
// at most c.Limit (capped at MaxCollectBatch) per call.
func (s *Store) CollectTasks(ctx context.Context, c state.CollectTasksCommand) (state.CollectOutcome, error) {
	stamp(&c.CommandMeta)
	if err := c.Validate(); err != nil {
		return state.CollectOutcome{}, err
	}
	out, _, err := applyTyped[state.CollectOutcome](ctx, s, state.MsgCollectTasks, c, c.RequestID)
	return out, err
}

// DefaultTaskRetention is how long terminal tasks stay readable when the
// retention function gives nothing usable.
const DefaultTaskRetention = 24 * time.Hour

// RunTaskCollector deletes expired terminal tasks every interval until ctx
// ends: cutoff = now - retention(), in batches while a collect reports More.
// Register it with OnLeader so only the leader proposes:
//
//	s.OnLeader(func(ctx context.Context) { s.RunTaskCollector(ctx, time.Minute, retention) })
func (s *Store) RunTaskCollector(ctx context.Context, interval time.Duration, retention func() time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		s.collectExpired(ctx, retention)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (s *Store) collectExpired(ctx context.Context, retention func() time.Duration) {
	keep := DefaultTaskRetention
	if retention != nil {
		if d := retention(); d > 0 {
			keep = d
		}
	}
	cutoff := time.Now().UTC().Add(-keep)
	for ctx.Err() == nil {
		out, err := s.CollectTasks(ctx, state.CollectTasksCommand{Before: cutoff})
		if err != nil {
			if ctx.Err() == nil {
				s.logger.Warn("collecting expired tasks failed; will retry", "error", err)
			}
			return
		}
		if out.Deleted > 0 {
			s.logger.Debug("collected expired tasks", "deleted", out.Deleted, "before", cutoff)
		}
		if !out.More {
			return
		}
	}
}
