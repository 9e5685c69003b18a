package raftstore

import (
	"context"
	"net"
	"testing"
	"time"

	"fusebox/internal/testwait"
	"fusebox/raftstore/state"
)

// A member gossip calls alive whose Raft port nobody reaches (a firewall,
// a certificate of another CA, a holder of the gossip key and nothing
// else) is added as a non-voter but never promoted. Before promotion
// waited for the leader's heartbeats, a lone node promoted it after
// Stabilization and lost its quorum, and so its leader, at once. A real
// node that joins after it is promoted as before, and writes commit.
func TestUnreachableMemberNotPromoted(t *testing.T) {
	c := newTestCluster(t, longReap)
	s := c.add("n1", 1)
	c.start("n1")
	c.leader(10 * time.Second)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	_ = ln.Close() // nobody listens there now
	c.members.set(Member{ID: "ghost", RaftAddr: dead, HTTPAddr: httpAddr("ghost"), Status: MemberAlive, LogVersion: s.cfg.LogVersion})
	testwait.For(t, 10*time.Second, "the ghost added as a non-voter", func() bool { return suffrage(t, s)["ghost"] == "Nonvoter" })
	// The leader says so (GET /v1/cluster/raft, fusebox admin raft).
	testwait.For(t, 10*time.Second, "the leader's heartbeats to the ghost reported failing", func() bool {
		_, failing := s.Stats().HeartbeatsFailing["ghost"]
		return failing
	})

	// A real node joins after it. The planner promotes in id order, and
	// the ghost ("ghost" < "n2") has waited longer: had it been promotable
	// it would have gone first, and with it n1's quorum, so n2 could never
	// have been promoted.
	c.add("n2", 1)
	c.start("n2")
	testwait.For(t, 20*time.Second, "n2 promoted", func() bool { return suffrage(t, s)["n2"] == "Voter" })
	if sf := suffrage(t, s); sf["ghost"] != "Nonvoter" {
		t.Fatalf("the ghost is %q after n2 joined, want Nonvoter", sf["ghost"])
	}
	if failing := s.Stats().HeartbeatsFailing; len(failing) != 1 {
		t.Errorf("heartbeats failing to %v, want the ghost alone (n2 is reached)", failing)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := s.PutEndpoint(ctx, state.PutEndpointCommand{Name: "ep", URL: "https://example.com"}); err != nil {
		t.Fatalf("a write with an unreachable non-voter in the configuration: %v", err)
	}
}
