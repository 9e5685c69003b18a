package hintpolicy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/sony/gobreaker/v2"

	"fusebox/breakerpool"
	"fusebox/cluster"
	"fusebox/dynconfig"
	"fusebox/internal/testwait"
	"fusebox/transport"
	"fusebox/transport/transporttest"
)

// pnode is one in-process fusebox node as far as hints go: a real breaker
// pool, a real memberlist membership on loopback and the hint policy.
type pnode struct {
	id   string
	m    *cluster.Membership
	pool *breakerpool.Pool
	pol  *Policy
	reg  *prometheus.Registry
	cfg  *dynconfig.Collection  // the pool's settings source, as in the node
	set  []dynconfig.Entry      // the collection's whole table
	url  atomic.Pointer[string] // where this node's executor posts
	dead atomic.Bool
	// hook, when set, sees every transition before the policy does.
	hook atomic.Pointer[func(id string, t breakerpool.Transition)]
}

// testSettings: FailureThreshold 6 (the default), MaxRequests 1, policy pol.
func testSettings(pol breakerpool.HintPolicy, timeout time.Duration) breakerpool.Settings {
	s := breakerpool.DefaultSettings()
	s.Timeout = breakerpool.Duration(timeout)
	s.HintPolicy = pol
	return s
}

// startPNode starts one node; join lists seeds.
func startPNode(t testing.TB, id string, s breakerpool.Settings, pcfg Config, join ...string) *pnode {
	t.Helper()
	n := &pnode{id: id, reg: prometheus.NewRegistry()}
	n.cfg = dynconfig.NewCollection(nil)
	t.Cleanup(func() { _ = n.cfg.Close() }) // after the pool's (cleanups run last-in first-out)
	n.setSettings(t, "", s)
	var fwd atomic.Pointer[Policy]
	observe := func(tr breakerpool.Transition) {
		if h := n.hook.Load(); h != nil {
			(*h)(n.id, tr)
		}
		if p := fwd.Load(); p != nil {
			p.Observe(tr)
		}
	}
	// As the node wires it: transitions and early warnings (first failure
	// for confirm, DefaultWarnAfter for probe and adopt) reach the policy.
	var err error
	n.pool, err = breakerpool.New(breakerpool.Config{Observer: observe,
		WarnAfter: 1, WarnUntil: breakerpool.DefaultWarnAfter, OnFailing: observe}, n.cfg, n.reg, nil)
	if err != nil {
		t.Fatal(err)
	}
	n.pool.Start()
	n.m, err = cluster.New(cluster.Config{NodeID: id, BindAddr: "127.0.0.1:0", Preset: cluster.PresetFast, Join: join}, nil, n.reg)
	if err != nil {
		t.Fatal(err)
	}
	if err := n.m.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if pcfg.Tick == 0 {
		pcfg.Tick = 100 * time.Millisecond
	}
	n.pol, err = New(pcfg, n.pool, n.m, nil, n.reg)
	if err != nil {
		t.Fatal(err)
	}
	fwd.Store(n.pol)
	n.pol.Start()
	t.Cleanup(n.stop)
	return n
}

// setSettings gives dest (every destination when "") the breaker settings s,
// written as the dynamic-config entries an operator would set: the
// circuit-breaker object, the hint policy and maxRetryAfter. The whole
// table is replaced, as Raft's watcher does.
func (n *pnode) setSettings(t testing.TB, dest string, s breakerpool.Settings) {
	t.Helper()
	raw := func(v any) json.RawMessage {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	n.set = append(n.set,
		dynconfig.Entry{Key: dynconfig.KeyBreakerSettings, Destination: dest, Value: raw(s)},
		dynconfig.Entry{Key: dynconfig.KeyBreakerHintPolicy, Destination: dest, Value: raw(string(s.HintPolicy))},
		dynconfig.Entry{Key: dynconfig.KeyBreakerMaxRetryAfter, Destination: dest, Value: raw(s.MaxRetryAfter.String())})
	n.cfg.Update(n.set)
	if err := n.cfg.Current().Invalid(); err != nil {
		t.Fatal(err)
	}
	if got := n.cfg.Settings("ns", dest); dest != "" && got != s.Normalized() {
		t.Fatalf("settings of %q: %+v, want %+v", dest, got, s.Normalized())
	}
}

// stop closes the node in the order the node package uses.
func (n *pnode) stop() {
	n.pol.Close()
	_ = n.m.Close()
	n.pool.Close()
}

// crash stops the node without a leave, as SIGKILL would.
func (n *pnode) crash() {
	n.dead.Store(true)
	n.pol.Close()
	_ = n.m.Shutdown() // no leave: peers see it fail
	n.pool.Close()
}

func startPCluster(t testing.TB, size int, s breakerpool.Settings, pcfg Config) []*pnode {
	t.Helper()
	nodes := []*pnode{startPNode(t, "n0", s, pcfg)}
	for i := 1; i < size; i++ {
		nodes = append(nodes, startPNode(t, fmt.Sprintf("n%d", i), s, pcfg, nodes[0].m.GossipAddr()))
	}
	testwait.For(t, 20*time.Second, "cluster to converge", func() bool {
		for _, n := range nodes {
			if n.m.NumAlive() != size {
				return false
			}
		}
		return true
	})
	// Policies stop before any membership leaves (as in the node): a
	// policy's in-flight UpdateMeta waits for a broadcast peers must receive.
	t.Cleanup(func() {
		for _, n := range nodes {
			n.pol.Close()
		}
	})
	// Every policy must see the full membership before owners are compared.
	testwait.For(t, 10*time.Second, "owner views to agree", func() bool {
		for _, n := range nodes {
			if len(n.pol.owners.Load().ids) != size {
				return false
			}
		}
		return true
	})
	return nodes
}

var errDown = errors.New("destination answered a failure status")

// newClient returns an HTTP client that keeps no idle connections (goleak).
func newClient(t testing.TB) *http.Client {
	tr := &http.Transport{DisableKeepAlives: true}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 2 * time.Second}
}

// call makes one call through n's breaker for k: a POST to n's URL with the
// node ID in a header; 5xx, 408, 429 and transport errors are "down"; a
// 429 or 503 carries its Retry-After deadline, as the real executor's do.
func (n *pnode) call(client *http.Client, k breakerpool.Key) error {
	exec := breakerpool.ExecutableFunc(func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, *n.url.Load(), strings.NewReader("{}"))
		if err != nil {
			return err
		}
		req.Header.Set("X-Node", n.id)
		resp, err := client.Do(req)
		if err != nil {
			return breakerpool.NewDestinationDownError("post", err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode >= 500 || resp.StatusCode == 408 || resp.StatusCode == 429 {
			d := breakerpool.NewDestinationDownError(resp.Status, errDown)
			if resp.StatusCode == 429 || resp.StatusCode == 503 { // as transport classifies
				d.RetryAfter, _ = transport.ParseRetryAfter(resp.Header.Get("Retry-After"), time.Now())
			}
			return d
		}
		return nil
	})
	return breakerpool.NewCircuitBreakerExecutable(n.pool.Get(k), exec).Execute(context.Background())
}

// driver issues calls for one key on one node at a steady rate from one
// goroutine, until stopped or its lifetime ends. Each driver starts at a
// random phase of its interval: independent nodes' traffic shares no clock
// tick (drivers started in a loop would otherwise call in lockstep, every
// node meeting an outage on the same tick — the early warning's worst case).
type driver struct {
	n                     *pnode
	ok, down, blocked     atomic.Int64
	lastOK                atomic.Int64 // unix ns of the latest success
	stopCh                chan struct{}
	wg                    sync.WaitGroup
	stopOnce              sync.Once
	interval, maxLifetime time.Duration
}

// driveAll starts a driver per node and waits until each has delivered once.
func driveAll(t *testing.T, nodes []*pnode, client *http.Client, k breakerpool.Key, perSecond int) []*driver {
	t.Helper()
	drivers := make([]*driver, 0, len(nodes))
	for _, n := range nodes {
		drivers = append(drivers, drive(t, n, client, k, perSecond))
	}
	testwait.For(t, 10*time.Second, "every node to deliver", func() bool {
		for _, d := range drivers {
			if d.ok.Load() == 0 {
				return false
			}
		}
		return true
	})
	return drivers
}

func drive(t testing.TB, n *pnode, client *http.Client, k breakerpool.Key, perSecond int) *driver {
	d := &driver{n: n, stopCh: make(chan struct{}), interval: time.Second / time.Duration(perSecond), maxLifetime: 60 * time.Second}
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		end := time.NewTimer(d.maxLifetime)
		defer end.Stop()
		phase := time.NewTimer(rand.N(d.interval))
		defer phase.Stop()
		select {
		case <-d.stopCh:
			return
		case <-phase.C:
		}
		tick := time.NewTicker(d.interval)
		defer tick.Stop()
		for {
			select {
			case <-d.stopCh:
				return
			case <-end.C:
				return
			case <-tick.C:
			}
			if n.dead.Load() {
				return
			}
			switch err := n.call(client, k); {
			case err == nil:
				d.ok.Add(1)
				d.lastOK.Store(time.Now().UnixNano())
			case breakerpool.IsCircuitBreakerOpen(err):
				d.blocked.Add(1)
			default:
				d.down.Add(1)
			}
		}
	}()
	t.Cleanup(d.stop)
	return d
}

func (d *driver) stop() {
	d.stopOnce.Do(func() { close(d.stopCh) })
	d.wg.Wait()
}

// deliveredSince reports whether the driver had a success after at.
func (d *driver) deliveredSince(at time.Time) bool { return d.lastOK.Load() > at.UnixNano() }

func status(n *pnode, k breakerpool.Key) breakerpool.Status {
	b, ok := n.pool.Lookup(k)
	if !ok {
		return breakerpool.Status{State: -1}
	}
	return b.Status()
}

func isOpen(n *pnode, k breakerpool.Key) bool { return status(n, k).State == gobreaker.StateOpen }

// callsFrom counts the destination's recorded calls from node id.
func callsFrom(dest *transporttest.Destination, id string) int {
	c := 0
	for _, call := range dest.Calls() {
		if call.Header.Get("X-Node") == id {
			c++
		}
	}
	return c
}

func probes(t testing.TB, n *pnode, role string) float64 {
	t.Helper()
	return testutil.ToFloat64(n.pol.met.probes.WithLabelValues(role))
}

func actions(t testing.TB, n *pnode, action string) float64 {
	t.Helper()
	return testutil.ToFloat64(n.pol.met.actions.WithLabelValues(action))
}

// setURL points every node's executor at url.
func setURL(url string, nodes ...*pnode) {
	for _, n := range nodes {
		n.url.Store(&url)
	}
}

// keyOwnedBy returns a key whose probe owner (as n sees it) is owner.
func keyOwnedBy(t testing.TB, n *pnode, owner string) breakerpool.Key {
	t.Helper()
	for i := range 1000 {
		k := testKey(fmt.Sprintf("dest-%d", i))
		if n.pol.Owner(k) == owner {
			return k
		}
	}
	t.Fatalf("no key owned by %s", owner)
	return breakerpool.Key{}
}

// tripLocally makes n's breaker for k trip by calling a dead destination
// until it opens (FailureThreshold calls).
func tripLocally(t testing.TB, n *pnode, client *http.Client, k breakerpool.Key) {
	t.Helper()
	for i := 0; i < 50 && !isOpen(n, k); i++ {
		_ = n.call(client, k)
	}
	if !isOpen(n, k) {
		t.Fatalf("%s: breaker %s did not open", n.id, k)
	}
}

// clockOf returns n's Lamport clock for k (0 if it has no state for k).
func clockOf(n *pnode, k breakerpool.Key) uint64 {
	n.pol.mu.Lock()
	defer n.pol.mu.Unlock()
	if st, ok := n.pol.keys[k]; ok {
		return st.clock
	}
	return 0
}

// waitOpenHandled waits until origin published an open hint for k and every
// peer has handled it (its clock for k reached the hint's generation), so
// that a test can look at the peers' breakers after the open hint rather
// than after an earlier failing one.
func waitOpenHandled(t testing.TB, origin *pnode, k breakerpool.Key, peers ...*pnode) {
	t.Helper()
	var gen uint64
	testwait.For(t, 10*time.Second, origin.id+" to publish an open hint", func() bool {
		origin.pol.mu.Lock()
		defer origin.pol.mu.Unlock()
		if st, ok := origin.pol.keys[k]; ok && st.published && st.pubState == cluster.HintOpen {
			gen = st.pubGen
			return true
		}
		return false
	})
	testwait.For(t, 10*time.Second, "every peer to handle the open hint", func() bool {
		for _, n := range peers {
			if clockOf(n, k) < gen {
				return false
			}
		}
		return true
	})
}

func testKey(dest string) breakerpool.Key {
	return breakerpool.Key{TaskGroup: breakerpool.TaskGroupNexusInvocation, NamespaceID: "ns", Destination: dest}
}
