package raftstore

import (
	"context"

	"fusebox/raftstore/state"
	"fusebox/shardmap"
)

// ImportTasks inserts pending tasks moved from another cluster in one raft
// entry (import_tasks), each keeping its id, attempts, next attempt,
// creation time and deadline; a task whose id or (namespace, request id)
// is already stored is a duplicate naming it. Each task's shard is
// ShardOf over this cluster's shard count, which may differ from the
// exporting cluster's. The command is new in LogVersionImportTasks: until
// every server runs a build that knows it, the gate refuses it
// (upgrade_pending) before proposing. It returns once this replica has
// applied the entry, so a read here sees the tasks.
func (s *Store) ImportTasks(ctx context.Context, ts []state.ImportedTask) ([]state.SubmitOutcome, error) {
	c := state.ImportTasksCommand{Tasks: append([]state.ImportedTask(nil), ts...)}
	stamp(&c.CommandMeta)
	n := s.state.ShardCount()
	if n <= 0 {
		return nil, unavailable("the shard count is not set yet; the cluster is still forming")
	}
	for i := range c.Tasks {
		t := &c.Tasks[i]
		t.Shard = shardmap.ShardOf(t.NamespaceID, t.WorkflowID, n)
	}
	if err := c.ValidateProposal(); err != nil {
		return nil, err
	}
	out, idx, err := applyTyped[[]state.SubmitOutcome](ctx, s, state.MsgImportTasks, c, c.RequestID)
	if err != nil {
		return nil, err
	}
	if err := s.WaitForApplied(ctx, idx); err != nil {
		return nil, err
	}
	return out, nil
}
