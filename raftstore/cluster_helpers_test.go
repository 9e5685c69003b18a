package raftstore

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"

	"fusebox/internal/testwait"
	"fusebox/raftstore/state"
)

// fakeMembers is a mutable, in-process membership view.
type fakeMembers struct {
	mu   sync.Mutex
	m    map[string]Member
	subs map[chan struct{}]struct{}
}

func newFakeMembers() *fakeMembers {
	return &fakeMembers{m: map[string]Member{}, subs: map[chan struct{}]struct{}{}}
}

func (f *fakeMembers) set(m Member) {
	f.mu.Lock()
	f.m[m.ID] = m
	for ch := range f.subs {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
	f.mu.Unlock()
}

func (f *fakeMembers) setStatus(id string, st MemberStatus) {
	f.mu.Lock()
	m := f.m[id]
	f.mu.Unlock()
	m.Status = st
	f.set(m)
}

func (f *fakeMembers) Members() []Member {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]Member, 0, len(f.m))
	for _, m := range f.m {
		out = append(out, m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

func (f *fakeMembers) Subscribe() (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	f.mu.Lock()
	f.subs[ch] = struct{}{}
	f.mu.Unlock()
	return ch, func() {
		f.mu.Lock()
		delete(f.subs, ch)
		f.mu.Unlock()
	}
}

// localForwarder stands in for the HTTP forwarder: it calls the leader's
// ApplyLocal in-process, and answers as the wire would (FSM errors inside the
// result, transport-level errors as errors).
type localForwarder struct {
	mu     sync.Mutex
	stores map[string]*Store // by HTTP address
	// hung: forwards to these addresses hang until their context ends (a
	// leader that stopped answering), each announced on the channel.
	hung map[string]chan struct{}
}

// hang makes forwards to addr hang (see hung); the channel receives one
// value per forward that reached addr.
func (l *localForwarder) hang(addr string) <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.hung == nil {
		l.hung = map[string]chan struct{}{}
	}
	ch := make(chan struct{}, 64)
	l.hung[addr] = ch
	return ch
}

func (l *localForwarder) ForwardApply(ctx context.Context, addr string, cmd []byte, reqID string) (*state.ApplyResult, error) {
	l.mu.Lock()
	s, hung := l.stores[addr], l.hung[addr]
	l.mu.Unlock()
	if hung != nil {
		select {
		case hung <- struct{}{}:
		default:
		}
		<-ctx.Done()
		return nil, fmt.Errorf("post %s: %w", addr, ctx.Err())
	}
	if s == nil {
		return nil, fmt.Errorf("dial %s: connection refused", addr)
	}
	res, err := s.ApplyLocal(ctx, cmd, reqID)
	if res != nil {
		return res, nil
	}
	return nil, err
}

type testCluster struct {
	t       testing.TB
	members *fakeMembers
	fwd     *localForwarder
	nodes   map[string]*Store
	regs    map[string]*prometheus.Registry
	dirs    map[string]string
	// addrs is each node's last Raft address: a node added again binds it
	// (a restart in place keeps its address; see add).
	addrs map[string]string
	tweak func(*Config)
}

func newTestCluster(t testing.TB, tweak func(*Config)) *testCluster {
	c := &testCluster{t: t, members: newFakeMembers(), fwd: &localForwarder{stores: map[string]*Store{}},
		nodes: map[string]*Store{}, regs: map[string]*prometheus.Registry{}, dirs: map[string]string{}, addrs: map[string]string{}, tweak: tweak}
	t.Cleanup(func() {
		for _, s := range c.nodes {
			_ = s.Close()
		}
	})
	return c
}

func httpAddr(id string) string { return "http-" + id }

// add creates (but does not start) a node and registers it as an alive member.
// startOlderN3 starts n1–n3, n3 advertising log version *n3Version (a
// server of an older release), and waits for a leader. It is read each
// time n3 is (re)built: set it before restarting n3 to upgrade it.
func startOlderN3(t testing.TB, n3Version *int) *testCluster {
	c := newTestCluster(t, func(cfg *Config) {
		if cfg.NodeID == "n3" {
			cfg.LogVersion = *n3Version
		}
	})
	for _, id := range []string{"n1", "n2", "n3"} {
		c.add(id, 3)
	}
	c.start("n1", "n2", "n3")
	c.leader(10 * time.Second)
	return c
}

func (c *testCluster) add(id string, expect int) *Store {
	c.t.Helper()
	dir, ok := c.dirs[id]
	if !ok {
		dir = c.t.TempDir()
		c.dirs[id] = dir
	}
	reg := prometheus.NewRegistry()
	cfg := Config{NodeID: id, DataDir: dir, RaftBindAddr: "127.0.0.1:0", BootstrapExpect: expect, Preset: PresetFast,
		ApplyHoldTimeout: 3 * time.Second, ReapTimeout: time.Second, Registerer: reg}
	if c.tweak != nil {
		c.tweak(&cfg)
	}
	// A node added again (a restart in place, an upgrade) binds the address
	// it had, as a restarted server on its host does. On a new address the
	// leader moves it (updateAddress), and hashicorp/raft v1.8.0 then reads
	// the follower's peer without its lock after an append (updateLastAppended
	// against startStopReplication; upstream hashicorp/raft#681, #471): a data
	// race -race reports, harmless here since the server's ID is unchanged
	// (DESIGN.md, "Address changes"). A new address only if the old one is
	// taken.
	deps := Deps{Members: c.members, Forwarder: c.fwd, Validator: fakeValidator{}}
	var s *Store
	var err error
	if old, ok := c.addrs[id]; ok && cfg.RaftBindAddr == "127.0.0.1:0" {
		again := cfg
		again.RaftBindAddr = old
		if s, err = New(again, deps); err != nil {
			c.t.Logf("%s: %s taken (%v); a new address", id, old, err)
		}
	}
	if s == nil {
		s, err = New(cfg, deps)
	}
	if err != nil {
		c.t.Fatal(err)
	}
	c.addrs[id] = s.RaftAddr()
	c.nodes[id], c.regs[id] = s, reg
	c.fwd.mu.Lock()
	c.fwd.stores[httpAddr(id)] = s
	c.fwd.mu.Unlock()
	c.members.set(Member{ID: id, RaftAddr: s.RaftAddr(), HTTPAddr: httpAddr(id), Status: MemberAlive, LogVersion: s.cfg.LogVersion})
	return s
}

func (c *testCluster) start(ids ...string) {
	c.t.Helper()
	for _, id := range ids {
		if err := c.nodes[id].Start(context.Background()); err != nil {
			c.t.Fatal(err)
		}
	}
}

// kill closes a node and marks it failed, as memberlist would.
func (c *testCluster) kill(id string) {
	c.t.Helper()
	if err := c.nodes[id].Close(); err != nil {
		c.t.Fatalf("close %s: %v", id, err)
	}
	c.fwd.mu.Lock()
	delete(c.fwd.stores, httpAddr(id))
	c.fwd.mu.Unlock()
	c.members.setStatus(id, MemberFailed)
	delete(c.nodes, id)
}

// leader waits until every live node agrees on one leader and returns it.
func (c *testCluster) leader(timeout time.Duration) *Store {
	c.t.Helper()
	var leader *Store
	testwait.For(c.t, timeout, "an agreed leader", func() bool {
		leader = nil
		var id string
		for _, s := range c.nodes {
			lid, _ := s.Leader()
			if lid == "" || (id != "" && lid != id) {
				return false
			}
			id = lid
		}
		leader = c.nodes[id]
		return leader != nil && leader.State() == raft.Leader
	})
	return leader
}

func (c *testCluster) follower() *Store {
	for _, s := range c.nodes {
		if s.State() == raft.Follower {
			return s
		}
	}
	c.t.Fatal("no follower")
	return nil
}

// waitAllApplied waits until every live node applied index.
func (c *testCluster) waitAllApplied(index uint64, timeout time.Duration) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	for id, s := range c.nodes {
		if err := s.WaitForApplied(ctx, index); err != nil {
			c.t.Fatalf("node %s: %v", id, err)
		}
	}
}

// threeVoters starts n1..n3 (tweak applied to each config) and waits until
// all three are voters.
func threeVoters(t testing.TB, tweak func(*Config)) *testCluster {
	t.Helper()
	c := newTestCluster(t, tweak)
	for _, id := range []string{"n1", "n2", "n3"} {
		c.add(id, 3)
	}
	c.start("n1", "n2", "n3")
	leader := c.leader(15 * time.Second)
	testwait.For(t, 10*time.Second, "3 voters", func() bool {
		sf := suffrage(t, leader)
		return len(sf) == 3 && sf["n1"] == "Voter" && sf["n2"] == "Voter" && sf["n3"] == "Voter"
	})
	return c
}

// longReap makes the reap timeout long, so that only the test (or an
// operator's command) removes servers.
func longReap(cfg *Config) { cfg.ReapTimeout = time.Hour }

func suffrage(t testing.TB, s *Store) map[string]string {
	t.Helper()
	servers, err := s.Configuration()
	if err != nil {
		if errors.Is(err, state.ErrUnavailable) {
			return nil
		}
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, sv := range servers {
		out[sv.ID] = sv.Suffrage
	}
	return out
}
