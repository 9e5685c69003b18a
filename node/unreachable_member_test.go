package node

import (
	"fmt"
	"net"
	"testing"
	"time"

	"fusebox/internal/gossiptest"
	"fusebox/internal/testwait"
)

// A member gossip keeps calling alive whose Raft port nobody reaches owns
// no shards once the leader's heartbeats have failed to it for the reap
// timeout: it cannot learn the log, and before, its shards stalled for as
// long as gossip kept it (a partition of the Raft port alone, a
// certificate of another CA, a holder of the gossip key and nothing else).
// It is never promoted either (raftstore.TestUnreachableMemberNotPromoted).
func TestRaftUnreachableMemberOwnsNoShards(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	_ = ln.Close() // nobody listens there now
	ml := gossiptest.Join(t, "ghost", fmt.Appendf(nil, `{"id":"ghost","raft":%q,"http":%q}`, dead, dead), nil, c.nodes[0].GossipAddr())
	n := c.nodes[0]
	testwait.For(t, 20*time.Second, "the ghost a gossip member", func() bool {
		for _, m := range n.members.Members() {
			if m.ID == "ghost" {
				return true
			}
		}
		return false
	})
	owned := func() int {
		k := 0
		for _, a := range n.store.Reader().ShardMap().Shards {
			if a.Owner == "ghost" {
				k++
			}
		}
		return k
	}
	// Placed as a live member first (its heartbeats have not failed for
	// long yet), then placed no more.
	testwait.For(t, 20*time.Second, "the ghost given shards as a live member", func() bool { return owned() > 0 })
	testwait.For(t, 40*time.Second, "no shard owned by the ghost", func() bool { return owned() == 0 && ml.NumMembers() == 4 })
	// The rest stay placed on the three real nodes.
	for i, a := range n.store.Reader().ShardMap().Shards {
		if a.Owner == "" {
			t.Fatalf("shard %d has no owner", i)
		}
	}
}
