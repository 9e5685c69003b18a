package raftstore

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"math/rand/v2"
	"time"

	"github.com/hashicorp/raft"

	"fusebox/internal/fastjson"
	"fusebox/raftstore/state"
)

// NewRequestID returns a random request id.
func NewRequestID() string {
	var b [16]byte
	_, _ = crand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Apply commits cmd from any node: locally on the leader, forwarded to the
// leader's HTTP API otherwise. While no leader is known it retries with jitter
// until ApplyHoldTimeout (or ctx) and then fails with ErrNoLeader. Retries
// reuse the request id, so a command whose outcome was ambiguous (leadership
// lost mid-apply, forward timeout) is applied at most once. An FSM rejection is
// returned both in the result and as the error.
func (s *Store) Apply(ctx context.Context, cmd []byte, requestID string) (*state.ApplyResult, error) {
	if requestID == "" {
		requestID = NewRequestID()
	}
	if err := state.ValidateCommand(cmd, requestID); err != nil {
		return nil, err
	}
	// The gate on the proposer, before forwarding (ApplyLocal gates again
	// on the leader): when the leader is the server still on an older
	// build, it cannot tell a type newer than its build from garbage
	// (invalid_argument), while this node can say what the caller must do
	// (upgrade_pending, naming the servers behind).
	if err := s.checkGate(state.MessageType(cmd[0])); err != nil {
		return nil, err
	}
	deadline := time.Now().Add(s.cfg.ApplyHoldTimeout)
	for {
		res, err, retry := s.tryApply(ctx, cmd, requestID)
		if !retry {
			return res, err
		}
		if ctx.Err() != nil {
			return nil, &state.Error{Code: state.CodeUnavailable, Message: "write not confirmed: " + ctx.Err().Error() + " (last: " + state.AsError(err).Error() + ")"}
		}
		if !time.Now().Before(deadline) {
			if errors.Is(err, state.ErrNoLeader) {
				return nil, &state.Error{Code: state.CodeNoLeader, Message: "no raft leader elected within " + s.cfg.ApplyHoldTimeout.String() + "; the cluster may have lost quorum"}
			}
			e := state.AsError(err)
			return nil, &state.Error{Code: state.CodeUnavailable, Message: "write not confirmed within " + s.cfg.ApplyHoldTimeout.String() + ": " + e.Error(), Leader: e.Leader, LeaderID: e.LeaderID}
		}
		t := time.NewTimer(50*time.Millisecond + rand.N(100*time.Millisecond))
		select {
		case <-ctx.Done():
			t.Stop()
		case <-t.C:
		}
	}
}

// tryApply makes one attempt; retry reports whether the error is transient.
func (s *Store) tryApply(ctx context.Context, cmd []byte, requestID string) (*state.ApplyResult, error, bool) {
	r := s.raft.Load()
	if r == nil {
		return nil, unavailable("raft not started"), false
	}
	if r.State() == raft.Leader {
		res, err := s.raftApply(ctx, r, cmd, requestID)
		return res, err, isRetryable(res, err)
	}
	era := s.leaderEra.Load() // before the leader is read: a change after it ends this forward
	_, leaderID := r.LeaderWithID()
	if leaderID == "" {
		return nil, state.ErrNoLeader, true
	}
	if string(leaderID) == s.cfg.NodeID {
		return nil, state.ErrNoLeader, true // stale: we just lost it
	}
	httpAddr := ""
	for _, m := range s.deps.Members.Members() {
		if m.ID == string(leaderID) {
			httpAddr = m.HTTPAddr
		}
	}
	if httpAddr == "" || s.deps.Forwarder == nil {
		return nil, unavailable("leader %s has no known HTTP address (or no forwarder is configured)", leaderID), true
	}
	fctx, cancel := context.WithTimeout(ctx, s.cfg.ApplyTimeout)
	defer cancel()
	defer context.AfterFunc(era.ctx, cancel)() // another leader known: give this one up (leader_watch.go)
	res, err := s.deps.Forwarder.ForwardApply(fctx, httpAddr, cmd, requestID)
	if err == nil && res == nil {
		err = &state.Error{Code: state.CodeInternal, Message: "forwarder returned no result"}
	}
	if err == nil && res.Err != nil {
		err = res.Err
	}
	if err != nil {
		var e *state.Error
		if !errors.As(err, &e) {
			// Transport failure: the outcome is unknown; the request id makes
			// the retry safe.
			s.metrics.forwarded.WithLabelValues("error").Inc()
			if era.ctx.Err() != nil && ctx.Err() == nil {
				return nil, unavailable("forward to leader %s at %s given up: this node learnt of another leader (%v)", leaderID, httpAddr, err), true
			}
			return nil, unavailable("forward to leader %s at %s: %v", leaderID, httpAddr, err), true
		}
		s.metrics.forwarded.WithLabelValues("error").Inc()
		return res, e, e.Retryable()
	}
	s.metrics.forwarded.WithLabelValues("ok").Inc()
	return res, nil, false
}

func isRetryable(res *state.ApplyResult, err error) bool {
	var e *state.Error
	if err == nil || !errors.As(err, &e) {
		return false
	}
	if res != nil && res.Err != nil {
		return false // the FSM decided; retrying would only replay the answer
	}
	return e.Retryable()
}

// ApplyLocal applies cmd on this node, which must be the leader; otherwise it
// returns ErrNotLeader with the leader hint. The HTTP handler of a forwarded
// write calls it.
func (s *Store) ApplyLocal(ctx context.Context, cmd []byte, requestID string) (*state.ApplyResult, error) {
	if requestID == "" {
		requestID = NewRequestID()
	}
	if err := state.ValidateCommand(cmd, requestID); err != nil {
		return nil, err
	}
	r := s.raft.Load()
	if r == nil {
		return nil, unavailable("raft not started")
	}
	if r.State() != raft.Leader {
		return nil, raftError(r, raft.ErrNotLeader)
	}
	if state.MessageType(cmd[0]) == state.MsgRejoin {
		return s.applyRejoin(r, cmd[1:]) // never enters the log
	}
	// The leader's own gate for a forwarded write (Apply gated it on the
	// proposer, by that node's view of the cluster).
	if err := s.checkGate(state.MessageType(cmd[0])); err != nil {
		return nil, err
	}
	return s.raftApply(ctx, r, cmd, requestID)
}

// raftApply is the single place raft's errors become typed errors.
func (s *Store) raftApply(ctx context.Context, r *raft.Raft, cmd []byte, requestID string) (*state.ApplyResult, error) {
	timeout := s.cfg.ApplyTimeout
	if d, ok := ctx.Deadline(); ok {
		if rem := time.Until(d); rem < timeout {
			timeout = max(rem, time.Millisecond)
		}
	}
	start := time.Now()
	f := r.Apply(state.EncodeEntry(cmd, requestID), timeout)
	if err := f.Error(); err != nil {
		return nil, raftError(r, err)
	}
	s.metrics.applyLatency.Observe(time.Since(start).Seconds())
	s.pushCommit()
	res, ok := f.Response().(*state.ApplyResult)
	if !ok {
		return nil, &state.Error{Code: state.CodeInternal, Message: "FSM returned an unexpected response type"}
	}
	if res.Err != nil {
		return res, res.Err
	}
	return res, nil
}

// raftError maps raft's errors onto typed errors.
func raftError(r *raft.Raft, err error) *state.Error {
	switch {
	case errors.Is(err, raft.ErrNotLeader):
		addr, id := r.LeaderWithID()
		if id == "" {
			return &state.Error{Code: state.CodeNoLeader, Message: "this node is not the leader and no leader is known"}
		}
		return &state.Error{Code: state.CodeNotLeader, Message: "this node is not the raft leader", Leader: string(addr), LeaderID: string(id)}
	case errors.Is(err, raft.ErrLeadershipLost):
		return unavailable("leadership lost while applying; the command may or may not have committed, retry with the same request id")
	case errors.Is(err, raft.ErrEnqueueTimeout):
		return unavailable("timed out enqueuing the command to raft")
	case errors.Is(err, raft.ErrRaftShutdown):
		return unavailable("raft is shut down")
	case errors.Is(err, raft.ErrLeadershipTransferInProgress):
		return unavailable("leadership transfer in progress")
	case errors.Is(err, raft.ErrAbortedByRestore):
		return unavailable("aborted by a snapshot restore")
	}
	return &state.Error{Code: state.CodeInternal, Message: "raft: " + err.Error()}
}

// applyTyped encodes a command, applies it and decodes the result value.
func applyTyped[T any](ctx context.Context, s *Store, t state.MessageType, payload any, requestID string) (T, uint64, error) {
	cmd, err := state.EncodeCommand(t, payload)
	if err != nil {
		var zero T
		return zero, 0, &state.Error{Code: state.CodeInternal, Message: err.Error()}
	}
	return applyCommand[T](ctx, s, cmd, requestID)
}

// applyCommand applies an encoded command and decodes the result value.
func applyCommand[T any](ctx context.Context, s *Store, cmd []byte, requestID string) (T, uint64, error) {
	var zero T
	res, err := s.Apply(ctx, cmd, requestID)
	if err != nil {
		return zero, 0, err
	}
	if v, ok := res.Typed.(T); ok {
		return v, res.Index, nil
	}
	var out T
	if len(res.Value) > 0 {
		if err := fastjson.Unmarshal(res.Value, &out); err != nil { // a forwarded result: the leader's own JSON
			return zero, res.Index, &state.Error{Code: state.CodeInternal, Message: "decode result: " + err.Error()}
		}
	}
	return out, res.Index, nil
}

func stamp(m *state.CommandMeta) {
	if m.At.IsZero() {
		m.At = time.Now().UTC()
	}
}
