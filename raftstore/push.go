package raftstore

import (
	"context"

	"github.com/hashicorp/raft"
)

// A follower learns that an entry committed only from the leader's next
// AppendEntries; raft's heartbeats do not carry the commit index. When no
// other write follows, that next append is the empty one raft sends every
// CommitTimeout to 2×CommitTimeout, written or not, and those empty appends
// (and the followers' answers) are a large part of what an idle cluster
// costs. With Config.PushCommits the
// leader instead follows each write it commits with a raft barrier: the
// barrier is a log entry of its own, so its append carries the write's
// commit index to every follower at once, and CommitTimeout can be long.
//
// One barrier is in flight at a time. Writes committed while it is become
// one kick, answered by one more barrier after it; a burst of writes costs
// at most one extra entry per round trip, and a steady stream of them
// (whose own appends carry the index anyway) one per commit. The barrier
// entry is raft's own LogBarrier, which every raft version applies without
// calling the FSM, so it needs no log version gate.

// pushCommit asks the leader's pushLoop for a barrier; it never blocks.
func (s *Store) pushCommit() {
	if !s.cfg.PushCommits {
		return
	}
	select {
	case s.pushKick <- struct{}{}:
	default: // a barrier is already asked for; it will cover this write too
	}
}

// pushLoop runs while this node leads (leaderLoop's ctx): one barrier per
// kick. A failed barrier (leadership lost, shutdown) is not retried: the
// next leader's own first entry, or CommitTimeout's append, carries the
// index then.
func (s *Store) pushLoop(ctx context.Context, r *raft.Raft) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.pushKick:
		}
		if err := r.Barrier(s.cfg.ApplyTimeout).Error(); err != nil {
			s.logger.Debug("pushing the commit index to followers failed", "error", err)
		}
	}
}
