package raftstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/hashicorp/raft"

	"fusebox/raftstore/state"
)

// RejoinCommand asks the leader to remove NodeID from the raft
// configuration because that node lost its log (Config.RejoinEmpty). It is
// never written to the log: the leader's ApplyLocal turns it into a raft
// RemoveServer, and the leader's reconcile loop adds the node back as a
// non-voter once it is alive, then promotes it (leader.go).
type RejoinCommand struct {
	state.CommandMeta
	NodeID string `json:"node_id"`
}

// RejoinResult is the leader's answer.
type RejoinResult struct {
	Removed  bool   `json:"removed"`  // false: the node was not in the configuration
	Suffrage string `json:"suffrage"` // what it was: "voter", "nonvoter" or ""
}

// applyRejoin runs on the leader: remove the server that lost its log, so
// no candidate asks it for a vote and no quorum counts it until it is a
// caught-up member again.
func (s *Store) applyRejoin(r *raft.Raft, payload []byte) (*state.ApplyResult, error) {
	var c RejoinCommand
	if err := state.DecodePayload(payload, &c); err != nil {
		return nil, err
	}
	if err := state.CheckName("node_id", c.NodeID, true); err != nil {
		return nil, err
	}
	if c.NodeID == s.cfg.NodeID {
		return nil, &state.Error{Code: state.CodeConflict, Field: "node_id", Message: fmt.Sprintf("node %s is the raft leader; its log is not empty, so it cannot rejoin as a new member", c.NodeID)}
	}
	f := r.GetConfiguration()
	if err := f.Error(); err != nil {
		return nil, raftError(r, err)
	}
	var found *raft.Server
	for _, sv := range f.Configuration().Servers {
		if string(sv.ID) == c.NodeID {
			found = &sv
		}
	}
	if found == nil {
		v, _ := json.Marshal(RejoinResult{})
		return &state.ApplyResult{Value: v}, nil
	}
	rf := r.RemoveServer(found.ID, 0, s.cfg.ApplyTimeout)
	if err := rf.Error(); err != nil {
		return nil, raftError(r, err)
	}
	suffrage := "nonvoter"
	if found.Suffrage == raft.Voter {
		suffrage = "voter"
	}
	s.logger.Warn("removed a server that lost its raft log; it rejoins as a non-voter", "server", c.NodeID, "was", suffrage, "index", rf.Index())
	v, _ := json.Marshal(RejoinResult{Removed: true, Suffrage: suffrage})
	return &state.ApplyResult{Value: v, Index: rf.Index()}, nil
}

// leaveForRejoin runs before raft starts on a node whose log was lost
// (Config.RejoinEmpty): it asks the leader, through any alive member's API,
// to remove this node's old entry from the configuration. It retries until
// the leader answers or RejoinTimeout passes.
func (s *Store) leaveForRejoin(ctx context.Context) error {
	if s.deps.Forwarder == nil {
		return errors.New("raftstore: rejoin needs Deps.Forwarder to reach the leader")
	}
	cmd, err := state.EncodeCommand(state.MsgRejoin, RejoinCommand{CommandMeta: state.CommandMeta{At: time.Now().UTC(), Author: s.cfg.NodeID}, NodeID: s.cfg.NodeID})
	if err != nil {
		return err
	}
	reqID := NewRequestID()
	deadline := time.Now().Add(s.cfg.RejoinTimeout)
	var last error = errors.New("no other alive member with an HTTP address is known (is --join set?)")
	hint := ""
	for {
		for _, addr := range s.rejoinTargets(hint) {
			fctx, cancel := context.WithTimeout(ctx, s.cfg.ApplyTimeout)
			res, err := s.deps.Forwarder.ForwardApply(fctx, addr, cmd, reqID)
			cancel()
			if err == nil && res != nil && res.Err != nil {
				err = res.Err
			}
			if err == nil && res != nil {
				var out RejoinResult
				_ = json.Unmarshal(res.Value, &out)
				s.logger.Warn("rejoining with an empty log: the leader dropped this node's old raft entry",
					"removed", out.Removed, "was", out.Suffrage, "via", addr)
				return nil
			}
			var e *state.Error
			switch {
			case errors.As(err, &e) && e.Code == state.CodeNotLeader && e.LeaderID != "":
				hint = s.httpAddrOf(e.LeaderID)
			case errors.As(err, &e) && !e.Retryable():
				return fmt.Errorf("raftstore: rejoin: %s refused to remove this node's old raft entry: %w", addr, err)
			}
			last = fmt.Errorf("%s: %w", addr, err)
		}
		if !time.Now().Before(deadline) {
			return fmt.Errorf("raftstore: rejoin: no leader removed this node's old raft entry within %s (last: %v); rejoining with an empty log needs a running cluster with a leader", s.cfg.RejoinTimeout, last)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("raftstore: rejoin: %w (last: %v)", ctx.Err(), last)
		case <-s.ctx.Done():
			return errors.New("raftstore: rejoin: store closed")
		case <-time.After(150*time.Millisecond + rand.N(150*time.Millisecond)):
		}
	}
}

// rejoinTargets lists the HTTP addresses to try: the hinted leader first,
// then every other alive member.
func (s *Store) rejoinTargets(hint string) []string {
	var out []string
	if hint != "" {
		out = append(out, hint)
	}
	for _, m := range s.deps.Members.Members() {
		if m.ID != s.cfg.NodeID && m.Status == MemberAlive && m.HTTPAddr != "" && m.HTTPAddr != hint {
			out = append(out, m.HTTPAddr)
		}
	}
	return out
}

func (s *Store) httpAddrOf(id string) string {
	for _, m := range s.deps.Members.Members() {
		if m.ID == id {
			return m.HTTPAddr
		}
	}
	return ""
}
