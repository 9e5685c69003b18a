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
// node that joins after it is promoted as before.
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

	// Four Stabilization periods: the ghost stays a non-voter and n1 keeps
	// committing writes alone the whole time.
	deadline := time.Now().Add(4 * s.cfg.Stabilization)
	ctx := context.Background()
	for i := 0; time.Now().Before(deadline); i++ {
		if sf := suffrage(t, s); sf["ghost"] != "Nonvoter" {
			t.Fatalf("the ghost is %q, want Nonvoter (configuration %v)", sf["ghost"], sf)
		}
		wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, err := s.PutEndpoint(wctx, state.PutEndpointCommand{Name: "ep", URL: "https://example.com"})
		cancel()
		if err != nil {
			t.Fatalf("write %d with an unreachable non-voter in the configuration: %v", i, err)
		}
		time.Sleep(50 * time.Millisecond) // pace the writes; the loop ends at the deadline, not on a guess
	}

	c.add("n2", 1)
	c.start("n2")
	testwait.For(t, 20*time.Second, "n2 promoted", func() bool { return suffrage(t, s)["n2"] == "Voter" })
	if sf := suffrage(t, s); sf["ghost"] != "Nonvoter" {
		t.Fatalf("the ghost is %q after n2 joined, want Nonvoter", sf["ghost"])
	}
}
