package raftstore

import (
	"context"

	"github.com/hashicorp/raft"
)

// leaderEra is a context that ends when the leader this node knows
// changes: raft reports a new leader, or none (a follower whose heartbeat
// timeout passed). A write forwarded to the leader is tied to the era it was
// sent in (tryApply), so a forward to a leader that stopped answering — cut
// off the network, or paused — is given up as soon as this node learns of
// another, instead of after ApplyTimeout: its HTTP call to a black-holed
// address hangs until then. Apply then retries at the new leader under the
// same request id, as after any forward that failed (the FSM applies a
// request id at most once).
//
// Measured where it was found (e2e TestPartitionedOwnerStopsCalling/leader:
// the leader cut off the network): the followers' result writes, forwarded
// to the cut leader, waited for ApplyHoldTimeout (5 s) and the tasks
// delivered in the first seconds of the cut were recorded done 4–10 s after
// their submit. TestForwardGivenUpWhenTheLeaderChanges.
type leaderEra struct {
	ctx    context.Context
	cancel context.CancelFunc
}

func newLeaderEra() *leaderEra {
	ctx, cancel := context.WithCancel(context.Background())
	return &leaderEra{ctx: ctx, cancel: cancel}
}

// leaderObserver ends the current era at every leader change raft reports.
// Its filter runs on raft's goroutine as raft reports the change, and only
// swaps a pointer and cancels a context.
func (s *Store) leaderObserver() *raft.Observer {
	return raft.NewObserver(nil, false, func(o *raft.Observation) bool {
		if _, ok := o.Data.(raft.LeaderObservation); ok {
			s.leaderEra.Swap(newLeaderEra()).cancel()
		}
		return false
	})
}
