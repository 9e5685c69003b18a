package raftstore

import (
	"net"
	"sync"
	"testing"
	"time"

	"fusebox/internal/testwait"
)

// tarpit accepts connections and never answers: a Raft RPC to it blocks in
// its read until the transport's timeout, or until the test closes the
// connections (the RPC then fails at once).
type tarpit struct {
	ln    net.Listener
	mu    sync.Mutex
	conns []net.Conn
}

func newTarpit(t *testing.T) *tarpit {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tp := &tarpit{ln: ln}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			tp.mu.Lock()
			tp.conns = append(tp.conns, c)
			tp.mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		<-done
		tp.closeAll()
	})
	return tp
}

func (tp *tarpit) accepted() int {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	return len(tp.conns)
}

func (tp *tarpit) closeAll() {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	for _, c := range tp.conns {
		_ = c.Close()
	}
	tp.conns = nil
}

// A server removed while the leader's heartbeat to it hung, and added again
// on the same address once it answers there (a node cut off the network,
// then healed), is promoted as usual. The hung heartbeat reports its
// failure when its call ends, after the new replication started, and no
// resume follows: its replication has ended. The leader took that failure
// for the new replication and never promoted the server.
func TestLateHeartbeatFailureOfEndedReplication(t *testing.T) {
	c := newTestCluster(t, func(cfg *Config) { cfg.Stabilization = 2 * time.Second })
	s := c.add("n1", 1)
	c.start("n1")
	c.leader(10 * time.Second)

	// n3's Raft address first answers nothing: the leader's calls hang.
	tp := newTarpit(t)
	addr := tp.ln.Addr().String()
	c.members.set(Member{ID: "n3", RaftAddr: addr, HTTPAddr: httpAddr("n3"), Status: MemberAlive, LogVersion: s.cfg.LogVersion})
	testwait.For(t, 10*time.Second, "n3 added as a non-voter", func() bool { return suffrage(t, s)["n3"] == "Nonvoter" })
	testwait.For(t, 10*time.Second, "the leader's replication and heartbeat to n3 hung", func() bool { return tp.accepted() >= 2 })
	c.members.setStatus("n3", MemberLeft)
	testwait.For(t, 10*time.Second, "n3 removed", func() bool { _, in := suffrage(t, s)["n3"]; return !in })

	// The real n3 comes up on that address and joins; then the hung calls
	// fail.
	_ = tp.ln.Close()
	c.addrs["n3"] = addr
	n3 := c.add("n3", 0)
	if n3.RaftAddr() != addr {
		t.Skipf("n3 could not bind %s again (got %s)", addr, n3.RaftAddr())
	}
	c.start("n3")
	testwait.For(t, 10*time.Second, "n3 added again as a non-voter", func() bool { return suffrage(t, s)["n3"] == "Nonvoter" })
	tp.closeAll()
	testwait.For(t, 20*time.Second, "n3 promoted after Stabilization", func() bool { return suffrage(t, s)["n3"] == "Voter" })
	if s.RaftUnreachable("n3") {
		t.Error("n3 reported unreachable while the leader reaches it")
	}
}
