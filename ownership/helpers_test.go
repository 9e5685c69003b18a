package ownership

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/prometheus/client_golang/prometheus"

	"fusebox/raftstore"
	"fusebox/raftstore/state"
	"fusebox/shardmap"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeMembers is a mutable membership view shared by every test node, so a
// test can declare a member dead as memberlist would, instantly.
type fakeMembers struct {
	mu   sync.Mutex
	m    map[string]raftstore.Member
	subs map[chan struct{}]struct{}
}

func (f *fakeMembers) set(m raftstore.Member) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.m[m.ID] = m
	for ch := range f.subs {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

func (f *fakeMembers) setStatus(id string, st raftstore.MemberStatus) {
	f.mu.Lock()
	m := f.m[id]
	f.mu.Unlock()
	m.Status = st
	f.set(m)
}

func (f *fakeMembers) Members() []raftstore.Member {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]raftstore.Member, 0, len(f.m))
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

// localForwarder calls the leader's ApplyLocal in process.
type localForwarder struct {
	mu     sync.Mutex
	stores map[string]*raftstore.Store
}

func (l *localForwarder) ForwardApply(ctx context.Context, addr string, cmd []byte, reqID string) (*state.ApplyResult, error) {
	l.mu.Lock()
	s := l.stores[addr]
	l.mu.Unlock()
	if s == nil {
		return nil, fmt.Errorf("dial %s: connection refused", addr)
	}
	res, err := s.ApplyLocal(ctx, cmd, reqID)
	if res != nil {
		return res, nil
	}
	return nil, err
}

// node is a Raft store plus its ownership manager.
type node struct {
	id    string
	store *raftstore.Store
	own   *Manager
	reg   *prometheus.Registry
}

type cluster struct {
	t       testing.TB
	members *fakeMembers
	fwd     *localForwarder
	nodes   map[string]*node
	dirs    map[string]string
	addrs   map[string]string // raft address, reused on restart as a real node does
	// preset, when set, is every store's timing preset (default fast).
	preset string
	// freshCheck and backstop, when set, replace the managers' 50 ms and
	// 500 ms: a test of what happens between two ticks makes them long.
	freshCheck, backstop time.Duration
	// caughtUp, when set, is every manager's Config.CaughtUp, told which
	// node's manager calls it.
	caughtUp func(id string, m *Manager)
	// handOver, when set, is every manager's Config.HandOver, told which
	// node's manager (the leader) calls it.
	handOver func(ctx context.Context, leader, node, httpAddr string, shards map[int]uint64) error
	// handOverWait, when set, is every manager's Config.HandOverWait.
	handOverWait time.Duration
	// unfit, when set, is every manager's Config.Unfit.
	unfit func(ctx context.Context) map[string]string
	// fences is Config.StoreFences.
	fences func(ctx context.Context) (map[int]shardmap.Assignment, error)
	// quiet nodes are started without gossip announcing them: their
	// members wait in pending for announce, which changes the membership
	// in one step with other changes.
	quiet   map[string]bool
	pending []raftstore.Member
}

func newCluster(t testing.TB) *cluster {
	c := &cluster{t: t, members: &fakeMembers{m: map[string]raftstore.Member{}, subs: map[chan struct{}]struct{}{}},
		fwd: &localForwarder{stores: map[string]*raftstore.Store{}}, nodes: map[string]*node{}, dirs: map[string]string{}, addrs: map[string]string{}}
	t.Cleanup(func() {
		for _, n := range c.nodes {
			_ = n.own.Close()
			_ = n.store.Close()
		}
	})
	return c
}

// start starts (or restarts, on its old data dir) a node with --shards.
func (c *cluster) start(id string, expect, shards int) *node {
	c.t.Helper()
	dir, ok := c.dirs[id]
	if !ok {
		dir = c.t.TempDir()
		c.dirs[id] = dir
	}
	addr, ok := c.addrs[id]
	if !ok {
		addr = "127.0.0.1:0"
	}
	preset := c.preset
	if preset == "" {
		preset = raftstore.PresetFast
	}
	s, err := raftstore.New(raftstore.Config{NodeID: id, DataDir: dir, RaftBindAddr: addr, BootstrapExpect: expect,
		Preset: preset, ApplyHoldTimeout: 3 * time.Second, ReapTimeout: time.Second},
		raftstore.Deps{Members: c.members, Forwarder: c.fwd})
	if err != nil {
		c.t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	backstop := c.backstop
	if backstop == 0 {
		backstop = 500 * time.Millisecond
	}
	var self atomic.Pointer[Manager]
	var caughtUp func()
	if hook := c.caughtUp; hook != nil {
		caughtUp = func() { hook(id, self.Load()) }
	}
	var handOver func(ctx context.Context, node, httpAddr string, shards map[int]uint64, wait, hold time.Duration) error
	if hook := c.handOver; hook != nil {
		handOver = func(ctx context.Context, node, httpAddr string, shards map[int]uint64, _, _ time.Duration) error {
			return hook(ctx, id, node, httpAddr, shards)
		}
	}
	own, err := New(Config{NodeID: id, Shards: shards, Backstop: backstop, FreshCheck: c.freshCheck, DrainTimeout: 10 * time.Second,
		AdminWait: 5 * time.Second, Registerer: reg, CaughtUp: caughtUp, HandOver: handOver, HandOverWait: c.handOverWait, Unfit: c.unfit, StoreFences: c.fences}, s, s.Reader(), c.members)
	if err != nil {
		c.t.Fatal(err)
	}
	self.Store(own)
	if err := own.Start(); err != nil {
		c.t.Fatal(err)
	}
	c.addrs[id] = s.RaftAddr()
	n := &node{id: id, store: s, own: own, reg: reg}
	c.nodes[id] = n
	c.fwd.mu.Lock()
	c.fwd.stores["http-"+id] = s
	c.fwd.mu.Unlock()
	if c.quiet[id] {
		c.pending = append(c.pending, raftstore.Member{ID: id, RaftAddr: s.RaftAddr(), HTTPAddr: "http-" + id, Status: raftstore.MemberAlive})
	} else {
		c.members.set(raftstore.Member{ID: id, RaftAddr: s.RaftAddr(), HTTPAddr: "http-" + id, Status: raftstore.MemberAlive})
	}
	if err := s.Start(context.Background()); err != nil {
		c.t.Fatal(err)
	}
	return n
}

// announce makes the pending members, and the given status changes, one
// membership change: subscribers hear of them together.
func (c *cluster) announce(changes map[string]raftstore.MemberStatus) {
	f := c.members
	f.mu.Lock()
	for _, m := range c.pending {
		f.m[m.ID] = m
	}
	for id, st := range changes {
		m := f.m[id]
		m.Status = st
		f.m[id] = m
	}
	for ch := range f.subs {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
	f.mu.Unlock()
	c.pending = nil
}

// crash closes a node as a crash looks to the others: gossip still says
// what it said before (alive) until a membership change says otherwise.
func (c *cluster) crash(id string) {
	c.t.Helper()
	n := c.nodes[id]
	_ = n.own.Close()
	if err := n.store.Close(); err != nil {
		c.t.Fatalf("close %s: %v", id, err)
	}
	c.fwd.mu.Lock()
	delete(c.fwd.stores, "http-"+id)
	c.fwd.mu.Unlock()
	delete(c.nodes, id)
}

// stop closes a node and marks it with the given gossip status.
func (c *cluster) stop(id string, st raftstore.MemberStatus) {
	c.t.Helper()
	c.crash(id)
	c.members.setStatus(id, st)
}

// converged reports whether every live node follows the same committed map
// in which every shard is owned by exactly one of want (and only by them),
// and that map gives each node exactly what its Owned reports.
func (c *cluster) converged(want ...string) bool {
	var ref *shardmap.Map
	for _, n := range c.nodes {
		m := n.own.Holder().Load()
		if m == nil || (ref != nil && m.Version != ref.Version) {
			return false
		}
		ref = m
	}
	if ref == nil {
		return false
	}
	ok := map[string]bool{}
	for _, w := range want {
		ok[w] = true
	}
	for _, a := range ref.Shards {
		if !ok[a.Owner] {
			return false
		}
	}
	for _, n := range c.nodes {
		if len(n.own.Owned()) != len(ref.OwnedBy(n.id)) {
			return false
		}
	}
	return true
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}
