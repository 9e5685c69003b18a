package raftstore

import (
	"context"
	"testing"
	"time"

	"fusebox/internal/testwait"
	"fusebox/raftstore/state"
)

// A write a follower forwarded to a leader that stopped answering is given
// up as soon as the follower learns of another leader, and committed there:
// it does not wait for ApplyTimeout (a minute here; on the old code this
// test's write hung that long).
func TestForwardGivenUpWhenTheLeaderChanges(t *testing.T) {
	c := threeVoters(t, func(cfg *Config) { cfg.ApplyTimeout, cfg.ApplyHoldTimeout = time.Minute, time.Minute })
	old := c.leader(10 * time.Second)
	var f *Store
	for _, s := range c.nodes {
		if s != old {
			f = s
			break
		}
	}
	reached := c.fwd.hang(httpAddr(old.NodeID()))
	done := make(chan error, 1)
	go func() {
		_, err := f.PutEndpoint(context.Background(), state.PutEndpointCommand{Name: "ep", URL: "https://example.com"})
		done <- err
	}()
	select {
	case <-reached:
	case err := <-done:
		t.Fatalf("the write returned (%v) before its forward reached the leader", err)
	case <-time.After(10 * time.Second):
		t.Fatal("the follower's write never reached the leader")
	}
	if err := old.raft.Load().LeadershipTransfer().Error(); err != nil {
		t.Fatalf("leadership transfer: %v", err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("the write after the leader changed: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the forward to the old leader was not given up when the leader changed")
	}
	testwait.For(t, 10*time.Second, "the write applied on the follower that made it", func() bool { _, ok := f.state.Endpoint("ep"); return ok })
}
