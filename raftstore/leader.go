package raftstore

import (
	"context"
	"slices"
	"sort"
	"time"

	"github.com/hashicorp/raft"
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
	if s.state.ClusterID() == "" {
		cmd, _ := EncodeCommand(MsgSetClusterID, SetClusterIDCommand{CommandMeta: CommandMeta{At: time.Now().UTC()}, ClusterID: NewRequestID()})
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
	rs := &reconcileState{nonvoterSince: map[string]time.Time{}, failedSince: map[string]time.Time{}}
	for {
		s.reconcile(ctx, r, rs)
		select {
		case <-ctx.Done():
			return
		case <-wake:
		case <-t.C:
		}
	}
}

// reconcileState is leader-local bookkeeping, reset every term.
type reconcileState struct {
	nonvoterSince map[string]time.Time // first seen as an alive non-voter
	failedSince   map[string]time.Time // first seen failed or missing
}

// reconcile makes the raft configuration follow membership: remove left
// servers at once and failed ones after ReapTimeout (never the leader, never
// below quorum of live voters), add alive members as non-voters, and promote
// non-voters alive for Stabilization up to the voter target.
func (s *Store) reconcile(ctx context.Context, r *raft.Raft, rs *reconcileState) {
	if ctx.Err() != nil || r.State() != raft.Leader {
		return
	}
	f := r.GetConfiguration()
	if err := f.Error(); err != nil {
		s.logger.Warn("reconcile: get configuration", "error", err)
		return
	}
	// A copy: raft hands every GetConfiguration caller the same cached
	// slice, and the removals below sort it.
	servers := slices.Clone(f.Configuration().Servers)
	members := map[string]Member{}
	alive := 0
	for _, m := range s.deps.Members.Members() {
		members[m.ID] = m
		if m.Status == MemberAlive && m.RaftAddr != "" {
			alive++
		}
	}
	target := s.cfg.VoterTarget
	if target == 0 {
		target = 3
		if alive >= 5 {
			target = 5
		}
	}
	now := time.Now()
	live := func(id string) bool {
		if id == s.cfg.NodeID {
			return true
		}
		m, ok := members[id]
		return ok && (m.Status == MemberAlive || m.Status == MemberSuspect)
	}
	voters, liveVoters := 0, 0
	inConfig := map[string]raft.Server{}
	for _, sv := range servers {
		inConfig[string(sv.ID)] = sv
		if sv.Suffrage == raft.Voter {
			voters++
			if live(string(sv.ID)) {
				liveVoters++
			}
		}
	}

	// 1. Removals, in id order for stable logs.
	sort.Slice(servers, func(i, j int) bool { return servers[i].ID < servers[j].ID })
	for _, sv := range servers {
		id := string(sv.ID)
		if id == s.cfg.NodeID {
			continue
		}
		m, known := members[id]
		remove := false
		switch {
		case known && m.Status == MemberLeft:
			remove = true
		case !known || m.Status == MemberFailed:
			since, ok := rs.failedSince[id]
			if !ok {
				rs.failedSince[id] = now
				since = now
			}
			remove = now.Sub(since) >= s.cfg.ReapTimeout
		default:
			delete(rs.failedSince, id)
		}
		if !remove {
			continue
		}
		if sv.Suffrage == raft.Voter {
			after := voters - 1
			lv := liveVoters
			if live(id) {
				lv--
			}
			if lv < after/2+1 {
				s.logger.Warn("reconcile: not removing voter; it would leave fewer live voters than a quorum", "server", id, "voters", voters, "live_voters", liveVoters)
				continue
			}
		}
		if err := r.RemoveServer(sv.ID, 0, s.cfg.ApplyTimeout).Error(); err != nil {
			s.logger.Warn("reconcile: remove server", "server", id, "error", err)
			return
		}
		s.logger.Info("removed server from raft configuration", "server", id, "status", m.Status.String(), "known", known)
		delete(inConfig, id)
		delete(rs.failedSince, id)
		delete(rs.nonvoterSince, id)
		if sv.Suffrage == raft.Voter {
			voters--
			if live(id) {
				liveVoters--
			}
		}
	}

	// 2. Additions as non-voters.
	ids := make([]string, 0, len(members))
	for id := range members {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		m := members[id]
		if m.Status != MemberAlive || m.RaftAddr == "" {
			continue
		}
		if sv, ok := inConfig[id]; ok {
			if string(sv.Address) != m.RaftAddr && id != s.cfg.NodeID {
				s.updateAddress(r, sv, m.RaftAddr)
			}
			continue
		}
		if err := r.AddNonvoter(raft.ServerID(id), raft.ServerAddress(m.RaftAddr), 0, s.cfg.ApplyTimeout).Error(); err != nil {
			s.logger.Warn("reconcile: add non-voter", "server", id, "error", err)
			return
		}
		s.logger.Info("added non-voter", "server", id, "raft_addr", m.RaftAddr)
		inConfig[id] = raft.Server{ID: raft.ServerID(id), Address: raft.ServerAddress(m.RaftAddr), Suffrage: raft.Nonvoter}
		rs.nonvoterSince[id] = now
	}

	// 3. Promotions up to the voter target.
	var candidates []string
	for id, sv := range inConfig {
		if sv.Suffrage == raft.Voter {
			delete(rs.nonvoterSince, id)
			continue
		}
		if m, ok := members[id]; !ok || m.Status != MemberAlive {
			delete(rs.nonvoterSince, id)
			continue
		}
		if _, ok := rs.nonvoterSince[id]; !ok {
			rs.nonvoterSince[id] = now
		}
		candidates = append(candidates, id)
	}
	sort.Strings(candidates)
	for _, id := range candidates {
		if voters >= target {
			return
		}
		if now.Sub(rs.nonvoterSince[id]) < s.cfg.Stabilization {
			continue
		}
		sv := inConfig[id]
		if err := r.AddVoter(sv.ID, sv.Address, 0, s.cfg.ApplyTimeout).Error(); err != nil {
			s.logger.Warn("reconcile: promote", "server", id, "error", err)
			return
		}
		s.logger.Info("promoted non-voter to voter", "server", id)
		delete(rs.nonvoterSince, id)
		voters++
	}
}

// updateAddress moves a server that came back on another Raft address (a
// restarted pod with a new IP, say) to the address its gossip metadata now
// advertises, keeping its suffrage: raft's AddVoter and AddNonvoter update the
// address of a server already in the configuration. Without it the leader
// would keep dialling the old address until the server is reaped.
func (s *Store) updateAddress(r *raft.Raft, sv raft.Server, addr string) {
	var f raft.IndexFuture
	if sv.Suffrage == raft.Voter {
		f = r.AddVoter(sv.ID, raft.ServerAddress(addr), 0, s.cfg.ApplyTimeout)
	} else {
		f = r.AddNonvoter(sv.ID, raft.ServerAddress(addr), 0, s.cfg.ApplyTimeout)
	}
	if err := f.Error(); err != nil {
		s.logger.Warn("reconcile: update server address", "server", sv.ID, "from", sv.Address, "to", addr, "error", err)
		return
	}
	s.logger.Info("updated server raft address", "server", sv.ID, "from", sv.Address, "to", addr)
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
