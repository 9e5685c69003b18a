package ownership

import (
	"context"
	"errors"
	"strings"
	"time"

	"fusebox/raftstore"
	"fusebox/raftstore/state"
	"fusebox/shardmap"
)

// runLeader is the OnLeader hook: while this node leads (ctx) and the
// manager runs, it re-places shards after every membership change, every
// change of the committed map or draining set, and on the backstop ticker.
func (m *Manager) runLeader(ctx context.Context) {
	m.goOwnedWait(func() { m.leaderLoop(ctx) })
}

// goOwnedWait runs f on the calling goroutine, registered with the manager's
// WaitGroup and cancelled by Close; it reports false if the manager is not
// running.
func (m *Manager) goOwnedWait(f func()) bool {
	m.mu.Lock()
	if m.closed || !m.started {
		m.mu.Unlock()
		return false
	}
	m.wg.Add(1)
	m.mu.Unlock()
	defer m.wg.Done()
	f()
	return true
}

// retryDelay is how soon a failed placement is retried.
const retryDelay = 200 * time.Millisecond

func (m *Manager) leaderLoop(leaderCtx context.Context) {
	ctx, cancel := context.WithCancel(leaderCtx)
	defer cancel()
	stop := context.AfterFunc(m.ctx, cancel)
	defer stop()

	memWake, unsubM := m.members.Subscribe()
	defer unsubM()
	metaWake, unsubS := m.state.Subscribe(state.TableMeta)
	defer unsubS()
	t := time.NewTicker(m.cfg.Backstop)
	defer t.Stop()
	m.log.Info("placing shards as raft leader")
	for {
		var retry <-chan time.Time
		if err := m.place(ctx); err != nil && ctx.Err() == nil {
			m.log.Warn("shard placement failed; retrying", "err", err)
			retry = time.After(retryDelay)
		}
		select {
		case <-ctx.Done():
			return
		case _, ok := <-memWake:
			if !ok {
				memWake = nil // membership shut down; the backstop remains
			}
		case <-metaWake:
		case <-t.C:
		case <-retry:
		}
	}
}

// placementMembers are the members that may own shards: gossip members that
// are alive or merely suspect (a suspect keeps its shards; only a member
// declared dead or left loses them), of this cluster (not holding another
// Raft history: such a member is never in the Raft configuration, and would
// never see the map), that run Raft (servers), that the
// leader's Raft heartbeats reach (a member gossip calls alive but Raft has
// not reached for the reap timeout cannot learn the log, and its shards
// stalled for as long as gossip kept it), and that are not draining.
func (m *Manager) placementMembers() []string {
	draining := map[string]bool{}
	for _, d := range m.state.DrainingNodes() {
		draining[d.Node] = true
	}
	var out []string
	cid := m.state.ClusterID()
	for _, mb := range m.members.Members() {
		if (mb.Status == raftstore.MemberAlive || mb.Status == raftstore.MemberSuspect) && mb.RaftAddr != "" && !draining[mb.ID] && !mb.Foreign(cid) &&
			!m.store.RaftUnreachable(mb.ID) {
			out = append(out, mb.ID)
		}
	}
	return out
}

// fitMembers leaves out of members those Config.Unfit names, unless that
// would leave none; a change of the set left out is logged.
func (m *Manager) fitMembers(ctx context.Context, members []string) []string {
	var unfit map[string]string
	if m.cfg.Unfit != nil {
		unfit = m.cfg.Unfit(ctx)
	}
	out := make([]string, 0, len(members))
	var left []string
	for _, id := range members {
		if _, bad := unfit[id]; bad {
			left = append(left, id)
			continue
		}
		out = append(out, id)
	}
	if len(out) == 0 {
		out, left = members, nil
	}
	key := strings.Join(left, ",")
	if prev := m.unfitLogged.Swap(&key); (prev == nil && key != "") || (prev != nil && *prev != key) {
		if len(left) > 0 {
			reasons := make([]string, len(left))
			for i, id := range left {
				reasons[i] = id + ": " + unfit[id]
			}
			m.log.Warn("placing no shard on members that cannot work now", "members", reasons)
		} else {
			m.log.Info("every live member may own shards again")
		}
	}
	return out
}

// place makes the committed map follow the live members: it sets the shard
// count if the cluster has none, then commits Rebalance(current, members,
// pins) if that differs from the current map, as a compare-and-set on the
// version it read. A lost race (an admin write, a newer leader) is not an
// error: the loop wakes on the change and places again.
func (m *Manager) place(ctx context.Context) error {
	count := m.state.ShardCount()
	if count == 0 {
		n, err := m.store.SetShardCount(ctx, state.SetShardCountCommand{
			CommandMeta: state.CommandMeta{Author: "leader:" + m.cfg.NodeID}, Count: m.cfg.Shards,
		})
		if err != nil {
			return err
		}
		m.log.Info("cluster shard count set", "shards", n)
		count = n
	}
	// The fences are read before the map: a fence ahead of the map read
	// after a read barrier comes from another history, not from a map
	// this replica has yet to apply (fences.go).
	fences := m.storeFences(ctx)
	cur := m.state.ShardMap()
	if anyFenceAhead(cur, count, fences) {
		if err := m.store.Sync(ctx); err != nil {
			return err
		}
		cur = m.state.ShardMap()
	}
	prev := cur
	if prev == nil {
		var err error
		if prev, err = shardmap.New(count); err != nil {
			return err
		}
	}
	next, changed, err := shardmap.Rebalance(prev, m.fitMembers(ctx, m.placementMembers()), prev.Pins())
	if err != nil {
		return err
	}
	if raised, why := raiseToFences(next, prev.Version+1, fences); raised != nil {
		m.metrics.fenced.Add(float64(len(why)))
		m.log.Warn("raising the epochs of shards whose task store fence is ahead of the shard map (a cluster rebuilt on an older cluster's database, or two clusters sharing one)",
			"shards", why)
		next, changed = raised, true
	}
	switch {
	case cur != nil && !changed:
		return nil
	case cur == nil && !changed: // no map yet and nobody to place on: commit the empty map
		c := *next
		c.Version = 1
		next = &c
	}
	// Shards leaving a live owner: it hands them over first, so the next
	// owner does not call their tasks again (handover.go). What needs no
	// hand-over (a failed owner's shards) is committed first, on its own:
	// the loop wakes on that commit and places the rest.
	if plan := m.handOverPlan(cur, next); len(plan) > 0 {
		if first := firstMoves(cur, next, plan); first != nil {
			return m.commit(ctx, cur, first)
		}
		if m.handOver(ctx, cur, plan) {
			return nil // a member failed meanwhile: the loop places again at once
		}
	}
	return m.commit(ctx, cur, next)
}

// commit proposes next as the map after cur (compare-and-set on cur's
// version; 0 when there is no map yet).
func (m *Manager) commit(ctx context.Context, cur, next *shardmap.Map) error {
	prevVersion := uint64(0)
	if cur != nil {
		prevVersion = cur.Version
	}
	_, err := m.store.CommitShardMap(ctx, state.CommitShardMapCommand{
		CommandMeta: state.CommandMeta{Author: "leader:" + m.cfg.NodeID}, PrevVersion: prevVersion, Map: next,
	})
	if errors.Is(err, state.ErrConflict) {
		m.metrics.commits.WithLabelValues("stale").Inc()
		m.log.Debug("shard map proposal lost a race; placing again", "prev_version", prevVersion, "err", err)
		return nil
	}
	if err != nil {
		m.metrics.commits.WithLabelValues("error").Inc()
		return err
	}
	m.metrics.commits.WithLabelValues("ok").Inc()
	m.log.Info("committed shard map", "version", next.Version, "moved", moved(cur, next))
	return nil
}

// moved counts the shards whose owner differs between a and b.
func moved(a, b *shardmap.Map) int {
	n := 0
	for i, s := range b.Shards {
		if a == nil || a.Shards[i].Owner != s.Owner {
			n++
		}
	}
	return n
}
