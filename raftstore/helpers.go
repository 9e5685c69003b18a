package raftstore

import (
	"context"
	"errors"

	"fusebox/breakerpool"
	"fusebox/raftstore/state"
)

// Typed write helpers. Each validates locally first (a bad request never
// reaches raft), stamps At with this node's clock if unset, and applies from
// any node. c.RequestID, if set, is the dedup id.

// SetConfig creates or replaces a config entry.
func (s *Store) SetConfig(ctx context.Context, c state.SetConfigCommand) (state.ConfigEntry, error) {
	stamp(&c.CommandMeta)
	canonical, verr := c.Validate(s.deps.Validator)
	if verr != nil {
		return state.ConfigEntry{}, verr
	}
	// Validated and canonicalised here, before proposing: the log holds the
	// value every replica writes.
	c.Value = canonical
	if s.clusterKnows(state.LogVersionConfigValue) {
		e, _, err := applyTyped[state.ConfigEntry](ctx, s, state.MsgSetConfigValue, c, c.RequestID)
		if !errors.Is(err, state.ErrUpgradePending) {
			return e, err
		}
		// The leader's view of the servers is older than ours: not
		// proposed, so the legacy type may go with the same request id.
	}
	e, _, err := applyTyped[state.ConfigEntry](ctx, s, state.MsgSetConfig, c, c.RequestID)
	return e, err
}

// DeleteConfig removes a config entry; ErrNotFound if there is none. It
// returns the raft index of the delete.
func (s *Store) DeleteConfig(ctx context.Context, c state.DeleteConfigCommand) (uint64, error) {
	stamp(&c.CommandMeta)
	if err := state.CheckName("key", c.Key, true); err != nil {
		return 0, err
	}
	_, idx, err := applyTyped[struct{}](ctx, s, state.MsgDeleteConfig, c, c.RequestID)
	return idx, err
}

// PutEndpoint creates or replaces a Nexus endpoint.
func (s *Store) PutEndpoint(ctx context.Context, c state.PutEndpointCommand) (state.Endpoint, error) {
	stamp(&c.CommandMeta)
	if err := c.Validate(); err != nil {
		return state.Endpoint{}, err
	}
	if c.Health != nil {
		h, err := state.ValidateEndpointHealth(*c.Health)
		if err != nil {
			return state.Endpoint{}, err
		}
		c.Health = &h
		if err := s.requireLogVersion(state.LogVersionEndpointHealth, "health"); err != nil {
			return state.Endpoint{}, err
		}
	}
	e, _, err := applyTyped[state.Endpoint](ctx, s, state.MsgPutEndpoint, c, c.RequestID)
	return e, err
}

// DeleteEndpoint removes a Nexus endpoint; ErrNotFound if there is none.
func (s *Store) DeleteEndpoint(ctx context.Context, c state.DeleteEndpointCommand) (uint64, error) {
	stamp(&c.CommandMeta)
	if err := state.ValidateEndpointName(c.Name); err != nil {
		return 0, err
	}
	_, idx, err := applyTyped[struct{}](ctx, s, state.MsgDeleteEndpoint, c, c.RequestID)
	return idx, err
}

// ForceBreaker forces a breaker key open/closed, or back to auto (then the
// returned row is the zero value). It returns the raft index of the change.
func (s *Store) ForceBreaker(ctx context.Context, c state.ForceBreakerCommand) (state.ForcedBreaker, uint64, error) {
	stamp(&c.CommandMeta)
	if err := c.Validate(); err != nil {
		return state.ForcedBreaker{}, 0, err
	}
	if err := ValidateTaskGroup(c.TaskGroup); err != nil {
		return state.ForcedBreaker{}, 0, err
	}
	return applyTyped[state.ForcedBreaker](ctx, s, state.MsgForceBreaker, c, c.RequestID)
}

// SetShardCount fixes the shard count once; a different later value is a
// conflict.
func (s *Store) SetShardCount(ctx context.Context, c state.SetShardCountCommand) (int, error) {
	stamp(&c.CommandMeta)
	n, _, err := applyTyped[int](ctx, s, state.MsgSetShardCount, c, c.RequestID)
	return n, err
}

// CommitShardMap commits a new shard map if the current one is still at
// c.PrevVersion (compare-and-set; 0 means "no map yet"). It returns the raft
// index of the commit. A stale proposal is a conflict on "prev_version".
func (s *Store) CommitShardMap(ctx context.Context, c state.CommitShardMapCommand) (uint64, error) {
	stamp(&c.CommandMeta)
	if c.Map == nil {
		return 0, invalidArg("map", "required")
	}
	if err := c.Map.Validate(); err != nil {
		return 0, invalidArg("map", "%v", err)
	}
	_, idx, err := applyTyped[uint64](ctx, s, state.MsgCommitShardMap, c, c.RequestID)
	return idx, err
}

// SetShardPin pins a shard to a node, or unpins it with Node "". The owner
// changes when the leader next places shards. It returns the raft index.
func (s *Store) SetShardPin(ctx context.Context, c state.SetShardPinCommand) (uint64, error) {
	stamp(&c.CommandMeta)
	if err := state.CheckName("node", c.Node, false); err != nil {
		return 0, err
	}
	_, idx, err := applyTyped[uint64](ctx, s, state.MsgSetShardPin, c, c.RequestID)
	return idx, err
}

// ReleaseShard makes a shard's owner let go (owner "", new epoch); the leader
// places it again. With c.Epoch set, it applies only at that epoch. It returns
// the raft index.
func (s *Store) ReleaseShard(ctx context.Context, c state.ReleaseShardCommand) (uint64, error) {
	stamp(&c.CommandMeta)
	_, idx, err := applyTyped[uint64](ctx, s, state.MsgReleaseShard, c, c.RequestID)
	return idx, err
}

// SetDrainingNode sets or clears a node's draining flag. It returns the raft
// index.
func (s *Store) SetDrainingNode(ctx context.Context, c state.SetDrainingNodeCommand) (uint64, error) {
	stamp(&c.CommandMeta)
	if err := c.Validate(); err != nil {
		return 0, err
	}
	_, idx, err := applyTyped[struct{}](ctx, s, state.MsgSetDrainingNode, c, c.RequestID)
	return idx, err
}

// ValidateTaskGroup refuses a task group the queue never produces, so a
// forced breaker for it could never match a breaker. It runs before a
// force is proposed (ForceBreaker, the API), not in the FSM: a log written
// before the check existed may hold such a row, and every replica must
// still apply it the same way.
func ValidateTaskGroup(g string) *state.Error {
	switch g {
	case breakerpool.TaskGroupNexusInvocation, breakerpool.TaskGroupNexusCancelation, breakerpool.TaskGroupCallback:
		return nil
	case "":
		return invalidArg("task_group", "required")
	}
	return invalidArg("task_group", "unknown task group %q: want %s, %s or %s", g,
		breakerpool.TaskGroupNexusInvocation, breakerpool.TaskGroupNexusCancelation, breakerpool.TaskGroupCallback)
}
