package raftstore

import (
	"context"
	"maps"
	"time"

	"github.com/hashicorp/raft"

	"fusebox/raftstore/state"
)

// monitorLeadership drains raft's NotifyCh (never blocking raft) and runs one
// leaderLoop per term of leadership. A stepped-down term's context is
// cancelled at once; its goroutine exits on its own (its raft futures fail
// with ErrLeadershipLost), so a new term never waits for the old one.
func (s *Store) monitorLeadership() {
	var cancel context.CancelFunc
	defer func() {
		if cancel != nil {
			cancel()
		}
	}()
	for {
		select {
		case <-s.ctx.Done():
			return
		case isLeader := <-s.notifyCh:
			switch {
			case isLeader && cancel == nil:
				ctx, c := context.WithCancel(s.ctx)
				cancel = c
				s.logger.Info("gained raft leadership")
				s.wg.Go(func() { s.leaderLoop(ctx) })
			case !isLeader && cancel != nil:
				s.logger.Info("lost raft leadership")
				cancel()
				cancel = nil
			}
		}
	}
}

// leaderLoop runs while this node leads: barrier, cluster id, the OnLeader
// hooks, then membership reconciliation until ctx ends.
func (s *Store) leaderLoop(ctx context.Context) {
	r := s.raft.Load()
	for {
		err := r.Barrier(s.cfg.ApplyTimeout).Error()
		if err == nil {
			break
		}
		s.logger.Warn("leader barrier failed; retrying", "error", err)
		if !sleepCtx(ctx, s.cfg.ReconcileInterval/4) {
			return
		}
	}
	if s.cfg.PushCommits {
		s.wg.Go(func() { s.pushLoop(ctx, r) })
		s.pushCommit() // the barrier above, and what the last term committed
	}
	if s.state.ClusterID() == "" {
		cmd, _ := state.EncodeCommand(state.MsgSetClusterID, state.SetClusterIDCommand{CommandMeta: state.CommandMeta{At: time.Now().UTC()}, ClusterID: NewRequestID()})
		if _, err := s.ApplyLocal(ctx, cmd, ""); err != nil {
			s.logger.Warn("setting the cluster id failed", "error", err)
		}
	}
	s.hooksMu.Lock()
	hooks := append([]func(context.Context){}, s.hooks...)
	s.hooksMu.Unlock()
	for _, h := range hooks {
		s.wg.Go(func() { h(ctx) })
	}

	wake, unsub := s.deps.Members.Subscribe()
	defer unsub()
	t := time.NewTicker(s.cfg.ReconcileInterval)
	defer t.Stop()
	rs := newReconcileState(failWindowFor(s.cfg.raftConfig().HeartbeatTimeout))
	// The leader's heartbeats say which servers Raft reaches: promotion
	// waits for them (reconcileState.unreachable). Not blocking: raft drops
	// an observation the channel has no room for, and this loop drains it
	// at once.
	obsCh := make(chan raft.Observation, 256)
	obs := raft.NewObserver(obsCh, false, func(o *raft.Observation) bool {
		switch o.Data.(type) {
		case raft.FailedHeartbeatObservation, raft.ResumedHeartbeatObservation:
			return true
		}
		return false
	})
	r.RegisterObserver(obs)
	defer r.DeregisterObserver(obs)
	defer s.unreachable.Store(nil)
	for {
		for _, id := range rs.expire(time.Now()) {
			s.logger.Info("reconcile: no heartbeat failure to server for a while; taken as reachable again", "server", id, "after", rs.failWindow)
		}
		s.reconcile(ctx, r, rs)
		s.publishUnreachable(rs)
	wait:
		for {
			select {
			case <-ctx.Done():
				return
			case o := <-obsCh:
				if id, unreachable, changed := rs.observe(o.Data, time.Now()); changed && unreachable {
					s.logger.Warn("reconcile: heartbeats to server failing; it is not promoted while they do", "server", id)
					s.publishUnreachable(rs)
				} else if changed {
					s.logger.Info("reconcile: heartbeats to server resumed", "server", id)
					s.publishUnreachable(rs)
				}
			case <-wake:
				break wait
			case <-t.C:
				break wait
			}
		}
	}
}

// publishUnreachable makes rs's unreachable servers what RaftUnreachable
// reads (a copy: rs is the leader loop's alone).
func (s *Store) publishUnreachable(rs *reconcileState) {
	m := maps.Clone(rs.unreachable)
	s.unreachable.Store(&m)
}

// RaftUnreachable reports whether this node leads and its heartbeats to
// server id have failed for at least ReapTimeout without resuming: a
// member gossip calls alive that Raft cannot reach (a partition of the
// Raft port alone, a certificate of another CA, a holder of the gossip key
// and nothing else). It cannot learn the log, so it should own no shards
// (ownership's placement).
func (s *Store) RaftUnreachable(id string) bool {
	m := s.unreachable.Load()
	if m == nil {
		return false
	}
	since, ok := (*m)[id]
	return ok && time.Since(since) >= s.cfg.ReapTimeout
}

// reconcile makes the Raft configuration follow membership (the rules are
// planReconcile's, reconcile.go) and carries the plan out in order, one
// configuration change at a time. A failed removal, addition or promotion
// ends the pass (the next pass plans again from the committed
// configuration); a failed address update is logged and the pass goes on.
func (s *Store) reconcile(ctx context.Context, r *raft.Raft, rs *reconcileState) {
	if ctx.Err() != nil || r.State() != raft.Leader {
		return
	}
	f := r.GetConfiguration()
	if err := f.Error(); err != nil {
		s.logger.Warn("reconcile: get configuration", "error", err)
		return
	}
	steps := planReconcile(reconcileInput{
		Self:          s.cfg.NodeID,
		ClusterID:     s.state.ClusterID(),
		Servers:       f.Configuration().Servers,
		Members:       s.deps.Members.Members(),
		VoterTarget:   s.cfg.VoterTarget,
		ReapTimeout:   s.cfg.ReapTimeout,
		Stabilization: s.cfg.Stabilization,
	}, rs, time.Now())
	for _, st := range steps {
		if ctx.Err() != nil || !s.applyStep(r, rs, st) {
			return
		}
	}
}

// applyStep carries out one step; false ends the pass.
func (s *Store) applyStep(r *raft.Raft, rs *reconcileState, st reconcileStep) bool {
	id := string(st.Server.ID)
	switch st.Kind {
	case stepForeign:
		s.logger.Error("reconcile: a member holds the Raft state of another cluster; it is not added to this one. Move its data dir away (keep it if that cluster still needs it) and start it again to join this cluster",
			"member", st.Member.ID, "its_cluster_id", st.Member.ClusterID, "cluster_id", s.state.ClusterID())
	case stepHoldVoter:
		s.logger.Warn("reconcile: not removing voter; it would leave fewer live voters than a quorum", "server", id, "voters", st.Voters, "live_voters", st.LiveVoters)
	case stepRemove:
		if err := r.RemoveServer(st.Server.ID, 0, s.cfg.ApplyTimeout).Error(); err != nil {
			s.logger.Warn("reconcile: remove server", "server", id, "error", err)
			return false
		}
		s.logger.Info("removed server from raft configuration", "server", id, "status", st.Member.Status.String(), "known", st.Known)
		delete(rs.failedSince, id)
		delete(rs.nonvoterSince, id)
		rs.forgetHeartbeats(id)
	case stepUpdateAddress:
		// Raft replicates to the new address afresh: a success there
		// reports no "resumed", so the old address's failures go.
		rs.forgetHeartbeats(id)
		s.updateAddress(r, st.Server, st.From)
	case stepAddNonvoter:
		rs.forgetHeartbeats(id) // a fresh replication: see stepUpdateAddress
		if err := r.AddNonvoter(st.Server.ID, st.Server.Address, 0, s.cfg.ApplyTimeout).Error(); err != nil {
			s.logger.Warn("reconcile: add non-voter", "server", id, "error", err)
			return false
		}
		s.logger.Info("added non-voter", "server", id, "raft_addr", string(st.Server.Address))
	case stepPromote:
		if err := r.AddVoter(st.Server.ID, st.Server.Address, 0, s.cfg.ApplyTimeout).Error(); err != nil {
			s.logger.Warn("reconcile: promote", "server", id, "error", err)
			return false
		}
		s.logger.Info("promoted non-voter to voter", "server", id)
		delete(rs.nonvoterSince, id)
	}
	return true
}

// updateAddress moves a server that came back on another Raft address (a
// restarted pod with a new IP, say) to the address its gossip metadata now
// advertises (sv.Address), keeping its suffrage: raft's AddVoter and
// AddNonvoter update the address of a server already in the configuration.
// Without it the leader would keep dialling the old address until the
// server is reaped.
func (s *Store) updateAddress(r *raft.Raft, sv raft.Server, from raft.ServerAddress) {
	var f raft.IndexFuture
	if sv.Suffrage == raft.Voter {
		f = r.AddVoter(sv.ID, sv.Address, 0, s.cfg.ApplyTimeout)
	} else {
		f = r.AddNonvoter(sv.ID, sv.Address, 0, s.cfg.ApplyTimeout)
	}
	if err := f.Error(); err != nil {
		s.logger.Warn("reconcile: update server address", "server", sv.ID, "from", from, "to", sv.Address, "error", err)
		return
	}
	s.logger.Info("updated server raft address", "server", sv.ID, "from", from, "to", sv.Address)
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
