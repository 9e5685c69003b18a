package raftstore

import (
	"sort"
	"time"

	"github.com/hashicorp/raft"
)

// bootstrapLoop implements BootstrapExpect > 1: wait until exactly N alive
// members with a raft address are visible (including this node), then
// bootstrap all N, sorted by id. Every one of the N does the same with the
// same configuration, which raft allows. It stops as soon as this node is part
// of a cluster (a leader is known or the log is non-empty), so a node that
// joins later is added by the leader instead.
func (s *Store) bootstrapLoop() {
	wake, unsub := s.deps.Members.Subscribe()
	defer unsub()
	t := time.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	for !s.tryBootstrap() {
		select {
		case <-s.ctx.Done():
			return
		case <-wake:
		case <-t.C:
		}
	}
}

// tryBootstrap reports whether bootstrapping is settled (done or not needed).
func (s *Store) tryBootstrap() bool {
	r := s.raft.Load()
	if _, id := r.LeaderWithID(); id != "" || r.LastIndex() > 0 {
		s.logger.Info("part of an existing cluster; not bootstrapping")
		return true
	}
	var servers []Member
	self := false
	for _, m := range s.deps.Members.Members() {
		if m.Status == MemberAlive && m.RaftAddr != "" {
			servers = append(servers, m)
			self = self || m.ID == s.cfg.NodeID
		}
	}
	if !self || len(servers) != s.cfg.BootstrapExpect {
		// Fewer: keep waiting. More: a cluster probably exists already and
		// its leader will add us; bootstrapping a subset could split it.
		return false
	}
	if s.deps.PeerState != nil {
		for _, m := range servers {
			if m.ID == s.cfg.NodeID {
				continue
			}
			has, err := s.deps.PeerState.HasRaftState(s.ctx, m)
			if err != nil {
				s.logger.Warn("bootstrap: cannot query peer raft state; will retry", "peer", m.ID, "error", err)
				return false
			}
			if has {
				s.logger.Info("bootstrap: peer already has raft state; not bootstrapping", "peer", m.ID)
				return true
			}
		}
	}
	sort.Slice(servers, func(i, j int) bool { return servers[i].ID < servers[j].ID })
	conf := raft.Configuration{}
	for _, m := range servers {
		conf.Servers = append(conf.Servers, raft.Server{ID: raft.ServerID(m.ID), Address: raft.ServerAddress(m.RaftAddr), Suffrage: raft.Voter})
	}
	if err := r.BootstrapCluster(conf).Error(); err != nil && err != raft.ErrCantBootstrap {
		s.logger.Error("bootstrap failed; will retry", "error", err)
		return false
	}
	s.logger.Info("bootstrapped cluster", "servers", len(conf.Servers))
	return true
}
