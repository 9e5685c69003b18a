package ownership

import (
	"context"
	"errors"
	"fmt"
	"time"

	"fusebox/raftstore"
	"fusebox/raftstore/state"
	"fusebox/shardmap"
)

// Admin operations. Operators' intents are Raft commands applied by the FSM
// (pin, release, draining flag); the leader's placement loop wakes on them
// and commits the resulting placement. Errors are *state.Error (with the
// offending field), errors wrapping shardmap.ErrNoSuchShard, or
// *shardmap.WrongOwnerError, which the API maps to typed answers.

// ShardMap returns the committed map as this node has applied it (nil before
// the first commit).
func (m *Manager) ShardMap() *shardmap.Map { return m.state.ShardMap() }

// DrainingNodes returns the nodes that placement skips, with why.
func (m *Manager) DrainingNodes() []state.DrainingNode { return m.state.DrainingNodes() }

// ShardStats returns a shard's task backlog and ack level; ok is false while
// the task table does not report them (Config.Stats unset).
func (m *Manager) ShardStats(shard int) (backlog int, ackLevel uint64, ok bool) {
	if m.cfg.Stats == nil {
		return 0, 0, false
	}
	return m.cfg.Stats(shard)
}

// assignment returns shard's entry in the committed map.
func (m *Manager) assignment(shard int) (shardmap.Assignment, error) {
	sm := m.state.ShardMap()
	if sm == nil {
		return shardmap.Assignment{}, &state.Error{Code: state.CodeUnavailable, Message: "no shard map has been committed yet"}
	}
	a, ok := sm.Owner(shard)
	if !ok {
		return shardmap.Assignment{}, fmt.Errorf("shard %d: %w (the cluster has %d shards)", shard, shardmap.ErrNoSuchShard, sm.NumShards)
	}
	return a, nil
}

// liveMember reports whether id is a live (alive or suspect) server member.
func (m *Manager) liveMember(id string) bool {
	for _, mb := range m.members.Members() {
		if mb.ID == id {
			return (mb.Status == raftstore.MemberAlive || mb.Status == raftstore.MemberSuspect) && mb.RaftAddr != ""
		}
	}
	return false
}

func (m *Manager) isDraining(id string) (state.DrainingNode, bool) {
	for _, d := range m.state.DrainingNodes() {
		if d.Node == id {
			return d, true
		}
	}
	return state.DrainingNode{}, false
}

func badNode(format string, args ...any) error {
	return &state.Error{Code: state.CodeInvalidArgument, Field: "node", Message: fmt.Sprintf(format, args...)}
}

// Move pins shard to node; the leader then moves it there (new epoch). node
// must be a live member that is not draining. It waits (up to AdminWait or
// ctx) until this node sees node own the shard and returns the assignment
// then, or the pinned assignment as it stands if placement takes longer.
func (m *Manager) Move(ctx context.Context, shard int, node string, author string) (shardmap.Assignment, error) {
	if _, err := m.assignment(shard); err != nil {
		return shardmap.Assignment{}, err
	}
	if node == "" {
		return shardmap.Assignment{}, badNode("required: the node to move the shard to")
	}
	if !m.liveMember(node) {
		return shardmap.Assignment{}, badNode("node %q is not a live member of the cluster", node)
	}
	if d, ok := m.isDraining(node); ok {
		return shardmap.Assignment{}, badNode("node %q is draining (%s); undrain it first", node, d.Reason)
	}
	idx, err := m.store.SetShardPin(ctx, state.SetShardPinCommand{CommandMeta: state.CommandMeta{Author: author}, Shard: shard, Node: node})
	if err != nil {
		return shardmap.Assignment{}, err
	}
	return m.waitAssignment(ctx, idx, shard, func(a shardmap.Assignment) bool { return a.Owner == node })
}

// Unpin removes shard's pin; the leader places it by hashing again.
func (m *Manager) Unpin(ctx context.Context, shard int, author string) (shardmap.Assignment, error) {
	if _, err := m.assignment(shard); err != nil {
		return shardmap.Assignment{}, err
	}
	idx, err := m.store.SetShardPin(ctx, state.SetShardPinCommand{CommandMeta: state.CommandMeta{Author: author}, Shard: shard})
	if err != nil {
		return shardmap.Assignment{}, err
	}
	return m.waitAssignment(ctx, idx, shard, func(shardmap.Assignment) bool { return true })
}

// CloseShard makes shard's owner release it (new epoch); the leader assigns
// it again with another new epoch. A live owner hands the shard over first,
// as before a planned move (closeHandOver). With epoch set, the close
// applies only if the shard is still at that epoch; otherwise it is refused
// with a *shardmap.WrongOwnerError naming the current owner and epoch. It
// waits (up to AdminWait or ctx) for the new assignment.
func (m *Manager) CloseShard(ctx context.Context, shard int, epoch *uint64, author string) (shardmap.Assignment, error) {
	a, err := m.assignment(shard)
	if err != nil {
		return shardmap.Assignment{}, err
	}
	if epoch != nil && *epoch != a.Epoch {
		return shardmap.Assignment{}, &shardmap.WrongOwnerError{Shard: shard, Owner: a.Owner, Epoch: a.Epoch}
	}
	m.closeHandOver(ctx, shard, a)
	idx, err := m.store.ReleaseShard(ctx, state.ReleaseShardCommand{CommandMeta: state.CommandMeta{Author: author}, Shard: shard, Epoch: epoch})
	if errors.Is(err, state.ErrConflict) && state.AsError(err).Field == "epoch" {
		// The shard moved between our read and the commit.
		if cur, e := m.assignment(shard); e == nil {
			return shardmap.Assignment{}, &shardmap.WrongOwnerError{Shard: shard, Owner: cur.Owner, Epoch: cur.Epoch}
		}
	}
	if err != nil {
		return shardmap.Assignment{}, err
	}
	released := a.Epoch
	if a.Owner != "" {
		released++ // the release itself took one epoch
	}
	return m.waitAssignment(ctx, idx, shard, func(b shardmap.Assignment) bool { return b.Owner != "" && b.Epoch > released })
}

// SetDraining sets or clears an operator drain of node. Draining moves all
// of node's shards elsewhere (pins to it stay recorded); undraining puts it
// back into placement. node must be a known member to drain, and a known
// member or a draining node to undrain.
func (m *Manager) SetDraining(ctx context.Context, node string, draining bool, author string) (uint64, error) {
	known := false
	for _, mb := range m.members.Members() {
		known = known || mb.ID == node
	}
	if _, ok := m.isDraining(node); !known && !(ok && !draining) {
		return 0, badNode("node %q is not a member of the cluster", node)
	}
	c := state.SetDrainingNodeCommand{CommandMeta: state.CommandMeta{Author: author}, Node: node, Draining: draining}
	if draining {
		c.Reason = state.DrainOperator
	}
	idx, err := m.store.SetDrainingNode(ctx, c)
	if err != nil {
		return 0, err
	}
	m.waitApplied(ctx, idx)
	return idx, nil
}

// Drain hands this node's shards to the other members before a graceful
// shutdown: it marks the node draining (reason "shutdown", cleared when the
// node starts again) and waits until the committed map gives it nothing, up
// to DrainTimeout or ctx. A node that owns nothing, or that is the only
// member placement could use, returns at once. The node keeps its flag until
// it restarts, so it gets no shards while it shuts down.
func (m *Manager) Drain(ctx context.Context) error {
	if len(m.Owned()) == 0 {
		return nil
	}
	others := 0
	for _, id := range m.placementMembers() {
		if id != m.cfg.NodeID {
			others++
		}
	}
	if others == 0 {
		m.log.Info("not draining: no other member can take this node's shards")
		return nil
	}
	m.draining.Store(true)
	ctx, cancel := context.WithTimeout(ctx, m.cfg.DrainTimeout)
	defer cancel()
	start := time.Now()
	m.log.Info("draining shards before shutdown", "owned", len(m.Owned()))
	if _, err := m.store.SetDrainingNode(ctx, state.SetDrainingNodeCommand{
		CommandMeta: state.CommandMeta{Author: "node:" + m.cfg.NodeID}, Node: m.cfg.NodeID, Draining: true, Reason: state.DrainShutdown,
	}); err != nil {
		return fmt.Errorf("ownership: drain: mark %s draining: %w", m.cfg.NodeID, err)
	}
	for {
		owned, changed := m.Watch()
		if len(owned) == 0 {
			m.log.Info("drained", "took", time.Since(start))
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return fmt.Errorf("ownership: drain: %d shards still owned after %s: %w", len(owned), time.Since(start).Round(time.Millisecond), ctx.Err())
		}
	}
}

// waitApplied gives read-your-writes on this node (bounded by AdminWait).
func (m *Manager) waitApplied(ctx context.Context, idx uint64) {
	ctx, cancel := context.WithTimeout(ctx, m.cfg.AdminWait)
	defer cancel()
	if err := m.store.WaitForApplied(ctx, idx); err != nil {
		m.log.Warn("write committed but not yet applied here", "index", idx, "err", err)
	}
}

// waitAssignment waits until index is applied here and shard's assignment
// satisfies done, up to AdminWait or ctx, and returns the assignment as it
// then stands (satisfied or not: the intent is committed either way).
func (m *Manager) waitAssignment(ctx context.Context, idx uint64, shard int, done func(shardmap.Assignment) bool) (shardmap.Assignment, error) {
	m.waitApplied(ctx, idx)
	ctx, cancel := context.WithTimeout(ctx, m.cfg.AdminWait)
	defer cancel()
	wake, unsub := m.state.Subscribe(state.TableMeta)
	defer unsub()
	for {
		a, err := m.assignment(shard)
		if err != nil || done(a) {
			return a, err
		}
		select {
		case <-wake:
		case <-ctx.Done():
			return a, nil
		}
	}
}

// closeHandOver asks a's owner, if it is a live member, to hand shard over
// before the close releases it, as the leader does before a planned move
// (handover.go): it starts no call on the shard, the calls under way end
// (for up to HandOverWait) and their results are written at the epoch it
// still holds. Without it the release fenced those results out, and the
// shard's next owner (often the same node, placed again) made every call
// under way again. A failed, suspect or unknown owner is not asked: a
// close is also how an operator frees a shard from an owner that is stuck.
func (m *Manager) closeHandOver(ctx context.Context, shard int, a shardmap.Assignment) {
	if m.cfg.HandOver == nil || a.Owner == "" {
		return
	}
	for _, mb := range m.members.Members() {
		if mb.ID == a.Owner && mb.Status == raftstore.MemberAlive && mb.HTTPAddr != "" {
			plan := map[string]handOverAsk{a.Owner: {addr: mb.HTTPAddr, shards: map[int]uint64{shard: a.Epoch}}}
			// handOver ends its wait early if an owner of the map it is given
			// fails: this one names a's owner only.
			m.handOver(ctx, &shardmap.Map{Shards: []shardmap.Assignment{a}}, plan)
			return
		}
	}
}
