package raftstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"fusebox/internal/testwait"
	"fusebox/raftstore/state"
)

// A voter that lost its raft.db rejoins with RejoinEmpty: before its raft
// starts, the leader drops its old entry (so no quorum counts it and no
// candidate asks for its vote), then adds it back as a non-voter and
// promotes it; it ends with every entry written before.
func TestRejoinEmptyRemovesThenReadds(t *testing.T) {
	c := threeVoters(t, longReap)
	leader := c.leader(15 * time.Second)
	victim := c.follower().NodeID()
	ctx := context.Background()
	var last uint64
	for i := range 50 {
		e, err := leader.SetConfig(ctx, state.SetConfigCommand{Key: "k", Namespace: fmt.Sprint("ns", i), Value: json.RawMessage(`{"a":1}`)})
		if err != nil {
			t.Fatal(err)
		}
		last = e.Index
	}
	c.waitAllApplied(last, 10*time.Second)
	dir := c.dirs[victim]
	c.kill(victim) // failed in gossip; the hour-long reap keeps it a voter
	if sf := suffrage(t, leader); sf[victim] != "Voter" {
		t.Fatalf("victim %s should still be a voter: %v", victim, sf)
	}
	removeLogStore(t, dir)

	if _, err := openStore(t, dir, victim, false); !errors.Is(err, ErrLogLost) {
		t.Fatalf("want the lost log refused, got %v", err)
	}
	c.tweak = func(cfg *Config) { cfg.ReapTimeout = time.Hour; cfg.RejoinEmpty = true }
	s := c.add(victim, 3)
	c.members.setStatus(victim, MemberFailed) // not re-added until it is alive
	c.start(victim)
	testwait.For(t, 10*time.Second, "the old entry removed by the leader", func() bool {
		_, ok := suffrage(t, leader)[victim]
		return !ok
	})
	c.members.setStatus(victim, MemberAlive)
	// A generous deadline: one CI run under -race, with the e2e processes
	// loading both cores, passed 15 s (it catches up, then is stable for
	// Stabilization, with every heartbeat answered).
	testwait.For(t, 30*time.Second, "the rejoined node promoted to voter", func() bool {
		return suffrage(t, leader)[victim] == "Voter"
	})
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := s.WaitForApplied(wctx, last); err != nil {
		t.Fatal(err)
	}
	if n := len(s.Reader().Config()); n != 50 {
		t.Fatalf("rejoined node has %d config entries, want 50", n)
	}
	if _, err := os.Stat(filepath.Join(dir, MarkerFile)); err != nil {
		t.Fatalf("marker: %v", err)
	}
}

// The leader refuses to remove itself: its log is not lost.
func TestRejoinRefusesTheLeader(t *testing.T) {
	c := newTestCluster(t, nil)
	s := c.add("n1", 1)
	c.start("n1")
	c.leader(10 * time.Second)
	cmd, err := state.EncodeCommand(state.MsgRejoin, RejoinCommand{CommandMeta: state.CommandMeta{At: time.Now()}, NodeID: "n1"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.ApplyLocal(context.Background(), cmd, "")
	if !errors.Is(err, state.ErrConflict) {
		t.Fatalf("want conflict, got %v", err)
	}
	// An unknown node is not in the configuration: nothing to remove.
	cmd, _ = state.EncodeCommand(state.MsgRejoin, RejoinCommand{CommandMeta: state.CommandMeta{At: time.Now()}, NodeID: "nx"})
	res, err := s.ApplyLocal(context.Background(), cmd, "")
	if err != nil {
		t.Fatal(err)
	}
	var out RejoinResult
	if err := json.Unmarshal(res.Value, &out); err != nil || out.Removed {
		t.Fatalf("want removed=false, got %s (%v)", res.Value, err)
	}
}

// With no other member, a rejoin fails with a clear error after its timeout.
func TestRejoinWithoutClusterFails(t *testing.T) {
	dir := ranSingleNode(t)
	if err := os.Remove(filepath.Join(dir, LogFile)); err != nil {
		t.Fatal(err)
	}
	s, err := New(Config{NodeID: "n1", DataDir: dir, RaftBindAddr: "127.0.0.1:0", BootstrapExpect: 1, Preset: PresetFast, RejoinEmpty: true, RejoinTimeout: 500 * time.Millisecond},
		Deps{Members: newFakeMembers(), Forwarder: &localForwarder{}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	err = s.Start(context.Background())
	if err == nil || !contains(err.Error(), "no leader removed this node's old raft entry within 500ms") {
		t.Fatalf("want a rejoin timeout, got %v", err)
	}
}
