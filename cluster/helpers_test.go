package cluster

import (
	"context"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"fusebox/breakerpool"
	"fusebox/internal/testwait"
)

type testNode struct {
	*Membership
	reg *prometheus.Registry
}

// startNode starts a fast-preset node on 127.0.0.1:0; opts adjust the config.
func startNode(t testing.TB, id string, opts ...func(*Config)) testNode {
	t.Helper()
	cfg := Config{NodeID: id, BindAddr: "127.0.0.1:0", Preset: PresetFast,
		Meta: Meta{HTTPAddr: "127.0.0.1:1" + id[len(id)-1:], Version: "test"}}
	for _, o := range opts {
		o(&cfg)
	}
	reg := prometheus.NewRegistry()
	m, err := New(cfg, nil, reg)
	if err != nil {
		t.Fatalf("New(%s): %v", id, err)
	}
	if err := m.Start(context.Background()); err != nil {
		t.Fatalf("Start(%s): %v", id, err)
	}
	t.Cleanup(func() { _ = m.Close() })
	return testNode{m, reg}
}

func joining(addrs ...string) func(*Config) {
	return func(c *Config) { c.Join = append(c.Join, addrs...) }
}

func withKeys(keys ...[]byte) func(*Config) {
	return func(c *Config) { c.Keys = keys }
}

// startCluster starts n nodes, all seeded with the first, and waits until
// every node sees n alive members.
func startCluster(t testing.TB, n int, opts ...func(*Config)) []testNode {
	t.Helper()
	nodes := []testNode{startNode(t, "n0", opts...)}
	for i := 1; i < n; i++ {
		o := append([]func(*Config){joining(nodes[0].GossipAddr())}, opts...)
		nodes = append(nodes, startNode(t, fmt.Sprintf("n%d", i), o...))
	}
	waitConverged(t, nodes, n)
	return nodes
}

func waitConverged(t testing.TB, nodes []testNode, alive int) {
	t.Helper()
	// 50 in-process nodes on a busy 2-core machine take longer than 20 s.
	deadline := max(20*time.Second, time.Duration(len(nodes))*time.Second)
	testwait.For(t, deadline, fmt.Sprintf("%d nodes to see %d alive", len(nodes), alive), func() bool {
		for _, n := range nodes {
			if n.NumAlive() != alive {
				return false
			}
		}
		return true
	})
}

// kill stops a node as a crash would: no leave intent, no leave broadcast.
func kill(m *Membership) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.left = true // Close must not Leave a shut-down memberlist
	m.joinCancel()
	_ = m.ml.Load().Shutdown()
}

func stateOf(m *Membership, id string) (MemberState, bool) {
	mem, ok := m.Member(id)
	return mem.State, ok
}

func counter(t testing.TB, c *prometheus.CounterVec, label string) float64 {
	t.Helper()
	return testutil.ToFloat64(c.WithLabelValues(label))
}

// freePort returns a loopback port that was free for both TCP and UDP.
// reservePort holds a loopback TCP and UDP port, refusing every connection
// (accepted and closed at once), until release: a node that joins it fails
// quickly, and no other test process can bind it meanwhile, which a port
// freed and bound again later allows (a join then reached a stranger).
func reservePort(t testing.TB) (port int, release func()) {
	t.Helper()
	for range 20 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port = l.Addr().(*net.TCPAddr).Port
		u, err := net.ListenPacket("udp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			l.Close()
			continue
		}
		done := make(chan struct{})
		go func() {
			defer close(done)
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				c.Close()
			}
		}()
		var once sync.Once
		release = func() {
			once.Do(func() {
				l.Close()
				u.Close()
				<-done
			})
		}
		t.Cleanup(release)
		return port, release
	}
	t.Fatal("no free port")
	return 0, nil
}

// recordingSink records every hint it is handed; a hint is fresh when its
// generation is higher than any seen for (key, origin).
type recordingSink struct {
	mu    sync.Mutex
	gens  map[seenKey]uint64
	hints []Hint
	at    map[breakerpool.Key]time.Time
}

func newSink() *recordingSink {
	return &recordingSink{gens: map[seenKey]uint64{}, at: map[breakerpool.Key]time.Time{}}
}

func (s *recordingSink) HandleHint(h Hint) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hints = append(s.hints, h)
	k := seenKey{h.Key, h.Origin}
	if g, ok := s.gens[k]; ok && g >= h.Generation {
		return false
	}
	s.gens[k] = h.Generation
	if _, ok := s.at[h.Key]; !ok {
		s.at[h.Key] = time.Now()
	}
	return true
}

func (s *recordingSink) has(k breakerpool.Key, gen uint64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, h := range s.hints {
		if h.Key == k && h.Generation == gen {
			return true
		}
	}
	return false
}

func (s *recordingSink) first() Hint {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hints[0]
}

func (s *recordingSink) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.hints)
}

// staticSource serves a fixed list of open hints.
type staticSource []Hint

func (s staticSource) OpenHints() []Hint { return append([]Hint(nil), s...) }

func testKey(dest string) breakerpool.Key {
	return breakerpool.Key{TaskGroup: breakerpool.TaskGroupNexusInvocation, NamespaceID: "ns", Destination: dest}
}

func gauge(t testing.TB, g *prometheus.GaugeVec, label string) float64 {
	t.Helper()
	return testutil.ToFloat64(g.WithLabelValues(label))
}

// fakeMembers makes ids alive members of n's table, as if each had joined
// (hints are accepted only from members' origins).
func fakeMembers(n *Membership, ids ...string) {
	for i, id := range ids {
		n.table.NotifyJoin(&memberlist.Node{Name: id, Addr: net.IPv4(127, 0, 0, 1), Port: uint16(40000 + i), Meta: []byte(`{"id":"` + id + `"}`)})
	}
}
