package raftstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"fusebox/internal/testwait"
	"fusebox/raftstore/state"
)

func TestSingleNodeBootstrapAndRestart(t *testing.T) {
	c := newTestCluster(t, nil)
	s := c.add("n1", 1)
	c.start("n1")
	ctx := context.Background()
	c.leader(10 * time.Second)
	e, err := s.SetConfig(ctx, state.SetConfigCommand{CommandMeta: state.CommandMeta{Author: "t"}, Key: "k", Value: json.RawMessage(`{ "a": 1 }`)})
	if err != nil {
		t.Fatal(err)
	}
	if string(e.Value) != `{"a":1}` {
		t.Fatalf("value not canonicalized: %s", e.Value)
	}
	if _, err := s.PutEndpoint(ctx, state.PutEndpointCommand{Name: "ep", URL: "https://example.com"}); err != nil {
		t.Fatal(err)
	}
	_, err = s.SetConfig(ctx, state.SetConfigCommand{Key: "reject.me", Value: json.RawMessage(`{}`)})
	if !errors.Is(err, state.ErrInvalidArgument) {
		t.Fatalf("want invalid argument, got %v", err)
	}
	testwait.For(t, 5*time.Second, "cluster id set by the leader", func() bool { return s.Reader().ClusterID() != "" })
	before := dumpState(s.Reader())
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}

	s2 := c.add("n1", 1) // same data dir
	c.start("n1")
	c.leader(10 * time.Second)
	testwait.For(t, 10*time.Second, "state replayed from the data dir", func() bool {
		return cmp.Equal(before, dumpState(s2.Reader()))
	})
}

func TestThreeNodeForwardingFailoverAndDedup(t *testing.T) {
	c := threeVoters(t, nil)
	leader := c.leader(15 * time.Second)
	ctx := context.Background()

	// A write on a follower is forwarded and applied everywhere.
	f := c.follower()
	e, err := f.SetConfig(ctx, state.SetConfigCommand{Key: "breaker.enabled", Namespace: "ns", Value: json.RawMessage(`{"on":true}`)})
	if err != nil {
		t.Fatal(err)
	}
	c.waitAllApplied(e.Index, 5*time.Second)
	for id, s := range c.nodes {
		if got, ok := s.Reader().ConfigEntry("breaker.enabled", "ns", ""); !ok || got.Index != e.Index {
			t.Fatalf("node %s: entry %+v %v", id, got, ok)
		}
	}
	if n := testutil.ToFloat64(f.metrics.forwarded.WithLabelValues("ok")); n < 1 {
		t.Fatalf("forwarded counter = %v", n)
	}
	// Validation errors come back typed through the forward.
	_, err = f.PutEndpoint(ctx, state.PutEndpointCommand{Name: "bad name", URL: "http://h"})
	var te *state.Error
	if !errors.As(err, &te) || te.Code != state.CodeInvalidArgument || te.Field != "name" {
		t.Fatalf("want invalid_argument on name, got %v", err)
	}
	cmd, _ := state.EncodeCommand(state.MsgSetShardCount, state.SetShardCountCommand{CommandMeta: state.CommandMeta{At: time.Now()}, Count: 8})
	if _, err := f.Apply(ctx, cmd, ""); err != nil {
		t.Fatal(err)
	}
	cmd2, _ := state.EncodeCommand(state.MsgSetShardCount, state.SetShardCountCommand{CommandMeta: state.CommandMeta{At: time.Now()}, Count: 9})
	if _, err := f.Apply(ctx, cmd2, ""); !errors.Is(err, state.ErrConflict) {
		t.Fatalf("want conflict, got %v", err)
	}

	// The same request id applied twice (via a follower, then the leader) → once.
	cmd3, _ := state.EncodeCommand(state.MsgSetConfig, state.SetConfigCommand{CommandMeta: state.CommandMeta{At: time.Now()}, Key: "dedup", Value: json.RawMessage(`{}`)})
	r1, err := f.Apply(ctx, cmd3, "req-dedup")
	if err != nil {
		t.Fatal(err)
	}
	r2, err := leader.Apply(ctx, cmd3, "req-dedup")
	if err != nil {
		t.Fatal(err)
	}
	if r1.Index != r2.Index {
		t.Fatalf("dedup failed: first index %d, retry index %d", r1.Index, r2.Index)
	}
	histDedup := 0
	for _, h := range leader.Reader().ConfigHistory(0) {
		if h.Key == "dedup" {
			histDedup++
		}
	}
	if histDedup != 1 {
		t.Fatalf("dedup command applied %d times", histDedup)
	}

	// Kill the leader: a new one is elected and writes resume.
	old := leader.NodeID()
	c.kill(old)
	leader = c.leader(15 * time.Second)
	if leader.NodeID() == old {
		t.Fatal("dead node still leader")
	}
	var s2 *Store
	for _, s := range c.nodes {
		s2 = s
	}
	ep, err := s2.PutEndpoint(ctx, state.PutEndpointCommand{Name: "after-failover", URL: "http://127.0.0.1:9"})
	if err != nil {
		t.Fatal(err)
	}
	c.waitAllApplied(ep.Index, 5*time.Second)
	for id, s := range c.nodes {
		if _, ok := s.Reader().Endpoint("after-failover"); !ok {
			t.Fatalf("node %s missing endpoint", id)
		}
	}
}

func TestNonvoterJoinsAndIsPromotedWhenVoterReaped(t *testing.T) {
	c := newTestCluster(t, nil)
	for _, id := range []string{"n1", "n2", "n3"} {
		c.add(id, 3)
	}
	c.start("n1", "n2", "n3")
	leader := c.leader(15 * time.Second)

	c.add("n4", 3) // sees 4 alive members: must not bootstrap, the leader adds it
	c.start("n4")
	testwait.For(t, 10*time.Second, "n4 added as non-voter", func() bool {
		return suffrage(t, leader)["n4"] == "Nonvoter"
	})
	e, err := c.nodes["n4"].SetConfig(context.Background(), state.SetConfigCommand{Key: "from-n4", Value: json.RawMessage(`{}`)})
	if err != nil {
		t.Fatal(err)
	}
	c.waitAllApplied(e.Index, 5*time.Second)

	// With 4 servers the target stays 3: n4 is not promoted while 3 voters live.
	if sf := suffrage(t, leader); sf["n4"] != "Nonvoter" {
		t.Fatalf("n4 promoted past the voter target: %v", sf)
	}

	var victim string
	for _, id := range []string{"n1", "n2", "n3"} {
		if id != leader.NodeID() {
			victim = id
			break
		}
	}
	c.kill(victim)
	testwait.For(t, 15*time.Second, "victim reaped and n4 promoted", func() bool {
		sf := suffrage(t, c.leader(10*time.Second))
		_, still := sf[victim]
		return !still && sf["n4"] == "Voter" && len(sf) == 3
	})
	e, err = c.nodes["n4"].SetConfig(context.Background(), state.SetConfigCommand{Key: "after-promotion", Value: json.RawMessage(`{}`)})
	if err != nil {
		t.Fatal(err)
	}
	c.waitAllApplied(e.Index, 5*time.Second)
}

func TestNoLeaderAfterHoldTimeout(t *testing.T) {
	c := newTestCluster(t, func(cfg *Config) { cfg.ApplyHoldTimeout = time.Second })
	for _, id := range []string{"n1", "n2", "n3"} {
		c.add(id, 3)
	}
	c.start("n1", "n2", "n3")
	leader := c.leader(15 * time.Second)
	var survivor *Store
	for id, s := range c.nodes {
		if s != leader && survivor == nil {
			survivor = s
			continue
		}
		c.kill(id)
	}
	start := time.Now()
	_, err := survivor.SetConfig(context.Background(), state.SetConfigCommand{Key: "k", Value: json.RawMessage(`{}`)})
	if !errors.Is(err, state.ErrNoLeader) {
		t.Fatalf("want ErrNoLeader, got %v", err)
	}
	if el := time.Since(start); el < time.Second {
		t.Fatalf("gave up after %s, before the hold timeout", el)
	}
	if !state.AsError(err).Retryable() {
		t.Fatalf("%v: want a retryable error", err)
	}
}

func TestOnLeaderHookRunsAndStops(t *testing.T) {
	c := newTestCluster(t, nil)
	s := c.add("n1", 1)
	started, stopped := make(chan struct{}), make(chan struct{})
	s.OnLeader(func(ctx context.Context) {
		close(started)
		<-ctx.Done()
		close(stopped)
	})
	c.start("n1")
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("leader hook not run")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-stopped:
	default:
		t.Fatal("Close returned before the leader hook stopped")
	}
}

func TestConfigValidation(t *testing.T) {
	members := newFakeMembers()
	base := Config{NodeID: "n", DataDir: t.TempDir(), RaftBindAddr: "127.0.0.1:0"}
	for _, tc := range []struct {
		mut  func(*Config)
		want string
	}{
		{func(c *Config) { c.NodeID = "" }, "NodeID"},
		{func(c *Config) { c.DataDir = "" }, "DataDir"},
		{func(c *Config) { c.RaftBindAddr = "nope" }, "RaftBindAddr"},
		{func(c *Config) { c.Preset = "wan" }, "Preset"},
		{func(c *Config) { c.VoterTarget = 4 }, "VoterTarget"},
		{func(c *Config) { c.BootstrapExpect = -1 }, "BootstrapExpect"},
	} {
		cfg := base
		tc.mut(&cfg)
		_, err := New(cfg, Deps{Members: members})
		if err == nil || !contains(err.Error(), tc.want) {
			t.Errorf("want error naming %s, got %v", tc.want, err)
		}
	}
	if _, err := New(base, Deps{}); err == nil || !contains(err.Error(), "Members") {
		t.Errorf("want error naming Members, got %v", err)
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }

// A server that restarts on another Raft address (a pod with a new IP) is
// moved to its new address by the leader, keeps its vote, and catches up.
func TestRestartedServerOnNewAddressIsUpdated(t *testing.T) {
	c := newTestCluster(t, func(cfg *Config) { cfg.ReapTimeout = time.Minute })
	for _, id := range []string{"n1", "n2", "n3"} {
		c.add(id, 3)
	}
	c.start("n1", "n2", "n3")
	leader := c.leader(15 * time.Second)
	victim := c.follower().NodeID()
	oldAddr := c.nodes[victim].RaftAddr()
	c.kill(victim)
	delete(c.addrs, victim) // a new port: add rebinds a node's old address otherwise
	s := c.add(victim, 3)   // same data dir
	if s.RaftAddr() == oldAddr {
		t.Fatalf("restart reused %s; the test needs a new address", oldAddr)
	}
	c.start(victim)
	testwait.For(t, 15*time.Second, "leader uses the new address", func() bool {
		servers, err := c.leader(10 * time.Second).Configuration()
		if err != nil {
			return false
		}
		for _, sv := range servers {
			if sv.ID == victim {
				return sv.Address == s.RaftAddr() && sv.Suffrage == "Voter"
			}
		}
		return false
	})
	e, err := leader.SetConfig(context.Background(), state.SetConfigCommand{Key: "after-move", Value: json.RawMessage(`{}`)})
	if err != nil {
		t.Fatal(err)
	}
	c.waitAllApplied(e.Index, 10*time.Second)
}

// After a permanent loss of quorum, writing the survivor's configuration to
// the peers file and restarting it brings the cluster back with its state.
func TestRecoverFromPeersFileAfterQuorumLoss(t *testing.T) {
	c := newTestCluster(t, nil)
	for _, id := range []string{"n1", "n2", "n3"} {
		c.add(id, 3)
	}
	c.start("n1", "n2", "n3")
	e, err := c.leader(15*time.Second).SetConfig(context.Background(), state.SetConfigCommand{Key: "before-loss", Value: json.RawMessage(`{}`)})
	if err != nil {
		t.Fatal(err)
	}
	c.waitAllApplied(e.Index, 5*time.Second)
	survivor := c.follower().NodeID()
	for _, id := range []string{"n1", "n2", "n3"} {
		if id != survivor {
			c.kill(id)
		}
	}
	c.kill(survivor)
	s := c.add(survivor, 3) // same data dir, new address
	peers := fmt.Sprintf(`[{"id": %q, "address": %q, "non_voter": false}]`, survivor, s.RaftAddr())
	path := filepath.Join(c.dirs[survivor], PeersFile)
	if err := os.WriteFile(path, []byte(peers), 0o600); err != nil {
		t.Fatal(err)
	}
	c.start(survivor)
	leader := c.leader(15 * time.Second)
	if leader.NodeID() != survivor {
		t.Fatalf("leader %s, want the survivor %s", leader.NodeID(), survivor)
	}
	found := false
	for _, ce := range leader.Reader().Config() {
		found = found || ce.Key == "before-loss"
	}
	if !found {
		t.Fatal("state written before the loss is gone after recovery")
	}
	if _, err := leader.SetConfig(context.Background(), state.SetConfigCommand{Key: "after-recovery", Value: json.RawMessage(`{}`)}); err != nil {
		t.Fatalf("write after recovery: %v", err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("peers file still there after recovery: %v", err)
	}
}
