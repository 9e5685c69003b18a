package raftstore

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"time"

	"github.com/hashicorp/raft"

	"fusebox/raftstore/state"
)

// Reads of the replicated state are local and stale-OK: Reader gives the
// state itself, and its consumers declare the few reads they need as
// interfaces of their own. For read-your-writes, WaitForApplied(result.Index)
// first.

// Reader returns this replica's state for reads (and Subscribe). The FSM is
// its only writer.
func (s *Store) Reader() *state.State { return s.state }

// Leader returns the leader's id and raft address as this node knows them.
func (s *Store) Leader() (id, addr string) {
	r := s.raft.Load()
	if r == nil {
		return "", ""
	}
	a, i := r.LeaderWithID()
	return string(i), string(a)
}

// State returns this node's raft state (Follower before Start).
func (s *Store) State() raft.RaftState {
	r := s.raft.Load()
	if r == nil {
		return raft.Follower
	}
	return r.State()
}

// Server is one entry of the raft configuration.
type Server struct {
	ID       string `json:"id"`
	Address  string `json:"address"`
	Suffrage string `json:"suffrage"` // "Voter", "Nonvoter", "Staging"
}

// Configuration returns the latest raft configuration this node knows.
func (s *Store) Configuration() ([]Server, error) {
	r := s.raft.Load()
	if r == nil {
		return nil, unavailable("raft not started")
	}
	f := r.GetConfiguration()
	if err := f.Error(); err != nil {
		return nil, raftError(r, err)
	}
	var out []Server
	for _, sv := range f.Configuration().Servers {
		out = append(out, Server{ID: string(sv.ID), Address: string(sv.Address), Suffrage: sv.Suffrage.String()})
	}
	return out, nil
}

// Stats is a summary of this node's raft progress.
type Stats struct {
	State        string `json:"state"`
	Term         uint64 `json:"term"`
	LastIndex    uint64 `json:"last_index"`
	CommitIndex  uint64 `json:"commit_index"`
	AppliedIndex uint64 `json:"applied_index"` // applied by the FSM
	LeaderID     string `json:"leader_id"`
	LeaderAddr   string `json:"leader_addr"`
	LogStore     string `json:"log_store"` // LogStoreWAL or LogStoreBolt: what this node's log is on
	// HeartbeatsFailing is, while this node leads, each server its
	// heartbeats fail to (a second failure confirmed it) and since when:
	// such a server is not promoted, and after ReapTimeout owns no shards
	// (RaftUnreachable). Empty on a follower.
	HeartbeatsFailing map[string]time.Time `json:"heartbeats_failing,omitempty"`
}

// Stats returns this node's raft progress.
func (s *Store) Stats() Stats {
	st := Stats{State: s.State().String(), AppliedIndex: s.fsm.AppliedIndex(), LogStore: s.cfg.LogStore}
	if r := s.raft.Load(); r != nil {
		st.Term, st.LastIndex, st.CommitIndex = r.CurrentTerm(), r.LastIndex(), r.CommitIndex()
	}
	st.LeaderID, st.LeaderAddr = s.Leader()
	if m := s.unreachable.Load(); m != nil && len(*m) > 0 {
		st.HeartbeatsFailing = maps.Clone(*m)
	}
	return st
}

// WaitForApplied blocks until this node's FSM applied index, or ctx ends,
// or the store fails (FailErr, wrapped; a halted FSM fails it too): a node
// that cannot follow the cluster may never apply index, and a wait to its
// deadline only held up its stop (the result writes of the calls its
// shutdown lets finish waited out the queue's drain timeout).
func (s *Store) WaitForApplied(ctx context.Context, index uint64) error {
	return s.fsm.WaitForAppliedOr(ctx, index, s.logFail.failed, s.FailErr)
}

// TransferLeadership hands leadership to another voter when this node is the
// leader of a multi-voter cluster, so a graceful shutdown does not leave the
// cluster waiting out an election timeout. It is a no-op otherwise.
func (s *Store) TransferLeadership(ctx context.Context, timeout time.Duration) error {
	r := s.raft.Load()
	if r == nil || r.State() != raft.Leader {
		return nil
	}
	servers, err := s.Configuration()
	if err != nil {
		return err
	}
	voters := 0
	for _, sv := range servers {
		if sv.Suffrage == raft.Voter.String() {
			voters++
		}
	}
	if voters < 2 {
		return nil
	}
	f := r.LeadershipTransfer()
	done := make(chan error, 1)
	go func() { done <- f.Error() }()
	select {
	case err := <-done:
		return err
	case <-time.After(timeout):
		return fmt.Errorf("leadership transfer did not finish within %s", timeout)
	case <-ctx.Done():
		return ctx.Err()
	}
}

// InContact reports whether this node is the leader, or a follower that
// knows a leader and, if maxLag > 0, heard from it within maxLag; never
// while its log store refuses writes (logguard.go). A
// follower cut off from the leader becomes a candidate after an election
// timeout (raft draws it from [HeartbeatTimeout, 2 × HeartbeatTimeout)) and
// stops being in contact; a node stopped (SIGSTOP) for a while is caught by
// its callers, which notice the gap in their own clock. maxLag <= 0: no bound
// on the age of the last contact (ContactLag is the one for calls).
func (s *Store) InContact(maxLag time.Duration) bool {
	r := s.raft.Load()
	if r == nil {
		return false
	}
	if _, _, failing := s.LogWritesFailing(); failing {
		return false // it applies nothing new (logguard.go)
	}
	if s.FailErr() != nil {
		return false // failed or halted: it applies nothing new, and stops
	}
	switch r.State() {
	case raft.Leader:
		return true // raft steps a leader down once it loses its lease
	case raft.Follower:
		if _, id := r.LeaderWithID(); id == "" {
			return false
		}
		if maxLag > 0 {
			last := r.LastContact()
			return !last.IsZero() && time.Since(last) <= maxLag
		}
		return true
	default:
		return false
	}
}

// CaughtUp reports whether this node is in contact (InContact) and has
// applied everything the leader told it was committed. A restarted node
// replaying its log is not caught up until it has applied the leader's
// newest entries, so state it reads before that (an old shard map) must not
// drive work.
func (s *Store) CaughtUp(maxLag time.Duration) bool {
	r := s.raft.Load()
	if r == nil || !s.InContact(maxLag) {
		return false
	}
	return r.State() == raft.Leader || r.AppliedIndex() >= r.CommitIndex()
}

// ContactLag bounds the age of a follower's last contact with the leader
// (raft's LastContact) while it calls destinations: half the heartbeat
// timeout, 500 ms with the lan timing. A leader heartbeats each follower
// every HeartbeatTimeout/10 to /5 (100–200 ms lan), apart from its appends
// (with the Raft task store at least every 2 × CommitTimeout, 10 ms lan, an
// empty one when there is nothing to send), so under a full delivery load
// the last contact was at most 91 ms old with the fast timing (125 ms
// bound; 22 ms at 1,000 tasks/s beside a CPU-bound neighbour). A follower
// cut off from the leader stops calling after it, not after raft's election
// timeout (1–2 s lan), and one in a minority with the old leader stops
// ContactLag after that leader lost its lease, not 1–2 s after: each call it
// makes then is one whose result cannot commit, delivered again by the next
// owner. An early session had given the contact age up: at 2 ×
// HeartbeatTimeout it flapped under the far heavier load per task of that
// code, and a lapse then dropped the node's shards with their calls in
// flight. Now a lapse delays new calls by a RejectRetry and touches no call
// in flight (ownership/DESIGN.md, freshness).
func (s *Store) ContactLag() time.Duration { return s.contactLag }

// FreshLag bounds how long a node may go without looking at its own
// freshness before it must assume it was stopped and re-sync: twice the
// heartbeat timeout, well under failure detection, so a node paused long
// enough for its shards to move always notices.
func (s *Store) FreshLag() time.Duration { return s.freshLag }

// Sync is a read barrier: it commits a no-op through the leader (forwarded
// from a follower) and waits until this replica has applied it, so every
// entry committed before the call is in the local state when it returns. A
// node that has just caught up after a restart or a pause uses it before it
// trusts its local shard map: a follower's commit index only covers the log
// it already has, so "applied everything committed" alone can be an old
// view.
func (s *Store) Sync(ctx context.Context) error {
	_, idx, err := applyTyped[json.RawMessage](ctx, s, state.MsgSync, struct{}{}, "")
	if err != nil {
		return err
	}
	return s.WaitForApplied(ctx, idx)
}
