// Package raftstoretest starts real raftstore stores on loopback for other
// packages' tests.
package raftstoretest

import (
	"context"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"fusebox/raftstore"
	"fusebox/raftstore/state"
	"fusebox/shardmap"
)

// soloMembers is the membership of a single-node cluster.
type soloMembers struct{ m raftstore.Member }

func (s soloMembers) Members() []raftstore.Member { return []raftstore.Member{s.m} }

func (s soloMembers) Subscribe() (<-chan struct{}, func()) {
	return make(chan struct{}), func() {}
}

// SingleNode starts a one-node store (fast preset, loopback, a temp data
// dir) named nodeID, waits until it leads, sets the shard count to shards
// and commits a map giving every shard to nodeID. The store is closed when
// the test ends.
func SingleNode(t testing.TB, nodeID string, shards int) *raftstore.Store {
	t.Helper()
	cfg := raftstore.Config{NodeID: nodeID, DataDir: t.TempDir(), RaftBindAddr: "127.0.0.1:0", BootstrapExpect: 1,
		Preset: raftstore.PresetFast}
	// Members must know this node's raft address, which New binds.
	members := &soloMembers{}
	s, err := raftstore.New(cfg, raftstore.Deps{Members: members})
	if err != nil {
		t.Fatal(err)
	}
	members.m = raftstore.Member{ID: nodeID, RaftAddr: s.RaftAddr(), HTTPAddr: "127.0.0.1:0", Status: raftstore.MemberAlive}
	t.Cleanup(func() { _ = s.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	for s.State() != raft.Leader {
		if ctx.Err() != nil {
			t.Fatal("single-node store did not become leader")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if _, err := s.SetShardCount(ctx, state.SetShardCountCommand{Count: shards}); err != nil {
		t.Fatal(err)
	}
	m, err := shardmap.New(shards)
	if err != nil {
		t.Fatal(err)
	}
	m, _, err = shardmap.Rebalance(m, []string{nodeID}, nil)
	if err != nil {
		t.Fatal(err)
	}
	idx, err := s.CommitShardMap(ctx, state.CommitShardMapCommand{PrevVersion: 0, Map: m})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.WaitForApplied(ctx, idx); err != nil {
		t.Fatal(err)
	}
	return s
}
