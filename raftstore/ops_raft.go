package raftstore

import (
	"context"
	"fmt"
	"time"

	"github.com/hashicorp/raft"

	"fusebox/raftstore/state"
)

// Operator raft operations (fusebox admin raft …). They run on the leader:
// on any other node they fail with not_leader (and the leader hint), and the
// API relays them to the leader.

// TransferResult is the answer of TransferLeader.
type TransferResult struct {
	From string `json:"from"`
	To   string `json:"to"` // the leader after the transfer, as this node saw it
}

// TransferLeader hands leadership to the voter to (any other voter when to
// is empty) and waits until another node leads, or ctx ends.
func (s *Store) TransferLeader(ctx context.Context, to string) (TransferResult, error) {
	r, err := s.leaderRaft()
	if err != nil {
		return TransferResult{}, err
	}
	servers, err := s.configuration(r)
	if err != nil {
		return TransferResult{}, err
	}
	voters := 0
	var target *raft.Server
	for i, sv := range servers {
		if sv.Suffrage == raft.Voter {
			voters++
			if string(sv.ID) == to {
				target = &servers[i]
			}
		}
	}
	switch {
	case to == s.cfg.NodeID:
		return TransferResult{}, &state.Error{Code: state.CodeConflict, Field: "to", Message: fmt.Sprintf("%s is already the leader", to)}
	case to != "" && target == nil:
		if inConfig(servers, to) {
			return TransferResult{}, &state.Error{Code: state.CodeConflict, Field: "to", Message: fmt.Sprintf("%s is not a voter; leadership can only go to a voter (fusebox admin raft lists them)", to)}
		}
		return TransferResult{}, &state.Error{Code: state.CodeNotFound, Field: "to", Message: fmt.Sprintf("%s is not in the raft configuration (fusebox admin raft lists the servers)", to)}
	case voters < 2:
		return TransferResult{}, &state.Error{Code: state.CodeConflict, Message: "this is the only voter; there is nobody to hand leadership to"}
	}
	var f raft.Future
	if target != nil {
		f = r.LeadershipTransferToServer(target.ID, target.Address)
	} else {
		f = r.LeadershipTransfer()
	}
	if err := waitFuture(ctx, f); err != nil {
		return TransferResult{}, &state.Error{Code: state.CodeUnavailable, Message: "leadership transfer failed: " + err.Error()}
	}
	s.logger.Info("leadership transferred by an operator", "to", to)
	res := TransferResult{From: s.cfg.NodeID}
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for {
		if id, _ := s.Leader(); id != "" && id != s.cfg.NodeID {
			res.To = id
			return res, nil
		}
		select {
		case <-ctx.Done():
			return res, nil // transferred; the new leader is not known here yet
		case <-t.C:
		}
	}
}

// RemovePeerResult is the answer of RemovePeer.
type RemovePeerResult struct {
	ID       string `json:"id"`
	Suffrage string `json:"suffrage"` // what it was: voter or nonvoter
	// Alive: gossip still sees the server alive, so the leader's reconcile
	// loop adds it back as a non-voter unless it is stopped.
	Alive bool   `json:"alive"`
	Index uint64 `json:"index"`
	Note  string `json:"note,omitempty"`
}

// RemovePeer removes server id from the raft configuration. It refuses,
// unless force is set, removing the last voter and removing a voter when the
// live voters left would not be a quorum of the voters left; it always
// refuses removing the leader itself (transfer leadership first).
func (s *Store) RemovePeer(ctx context.Context, id string, force bool) (RemovePeerResult, error) {
	if err := state.CheckName("id", id, true); err != nil {
		return RemovePeerResult{}, err
	}
	r, err := s.leaderRaft()
	if err != nil {
		return RemovePeerResult{}, err
	}
	if id == s.cfg.NodeID {
		return RemovePeerResult{}, &state.Error{Code: state.CodeConflict, Field: "id", Message: fmt.Sprintf("%s is the raft leader; move leadership first (fusebox admin raft transfer-leader), then remove it through the new leader", id)}
	}
	servers, err := s.configuration(r)
	if err != nil {
		return RemovePeerResult{}, err
	}
	alive := map[string]bool{s.cfg.NodeID: true}
	for _, m := range s.deps.Members.Members() {
		if m.Status == MemberAlive || m.Status == MemberSuspect {
			alive[m.ID] = true
		}
	}
	var found *raft.Server
	voters, liveVoters := 0, 0
	for i, sv := range servers {
		if string(sv.ID) == id {
			found = &servers[i]
		}
		if sv.Suffrage == raft.Voter {
			voters++
			if alive[string(sv.ID)] {
				liveVoters++
			}
		}
	}
	if found == nil {
		return RemovePeerResult{}, &state.Error{Code: state.CodeNotFound, Field: "id", Message: fmt.Sprintf("%s is not in the raft configuration (fusebox admin raft lists the servers)", id)}
	}
	res := RemovePeerResult{ID: id, Suffrage: "nonvoter", Alive: alive[id]}
	if found.Suffrage == raft.Voter {
		res.Suffrage = "voter"
		if msg := quorumRefusal(id, voters, liveVoters, alive[id]); msg != "" && !force {
			return RemovePeerResult{}, &state.Error{Code: state.CodeConflict, Field: "id", Message: msg + "; pass --force to remove it anyway"}
		}
	}
	f := r.RemoveServer(found.ID, 0, s.cfg.ApplyTimeout)
	if err := waitFuture(ctx, f); err != nil {
		return RemovePeerResult{}, raftError(r, err)
	}
	res.Index = f.Index()
	if res.Alive {
		res.Note = fmt.Sprintf("%s is alive in gossip: the leader adds it back as a non-voter (and promotes it) unless it is stopped", id)
	}
	s.logger.Warn("removed a server from the raft configuration by an operator", "server", id, "was", res.Suffrage, "alive", res.Alive, "forced", force, "index", res.Index)
	return res, nil
}

// quorumRefusal says why removing voter id would be unsafe, or "".
func quorumRefusal(id string, voters, liveVoters int, live bool) string {
	after := voters - 1
	if after == 0 {
		return fmt.Sprintf("%s is the last voter; removing it leaves a cluster nobody can elect a leader of", id)
	}
	liveAfter := liveVoters
	if live {
		liveAfter--
	}
	if liveAfter < after/2+1 {
		return fmt.Sprintf("removing voter %s leaves %d voters of which %d are alive, fewer than a quorum of %d", id, after, liveAfter, after/2+1)
	}
	return ""
}

// leaderRaft returns raft when this node is the leader, else not_leader
// with the hint (or no_leader).
func (s *Store) leaderRaft() (*raft.Raft, error) {
	r := s.raft.Load()
	if r == nil {
		return nil, unavailable("raft not started")
	}
	if r.State() != raft.Leader {
		return nil, raftError(r, raft.ErrNotLeader)
	}
	return r, nil
}

func (s *Store) configuration(r *raft.Raft) ([]raft.Server, error) {
	f := r.GetConfiguration()
	if err := f.Error(); err != nil {
		return nil, raftError(r, err)
	}
	return append([]raft.Server(nil), f.Configuration().Servers...), nil
}

func inConfig(servers []raft.Server, id string) bool {
	for _, sv := range servers {
		if string(sv.ID) == id {
			return true
		}
	}
	return false
}

// waitFuture waits for f or ctx; raft's futures have no context.
func waitFuture(ctx context.Context, f raft.Future) error {
	done := make(chan error, 1)
	go func() { done <- f.Error() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}
