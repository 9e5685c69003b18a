package node

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/goleak"

	"fusebox/api"
	"fusebox/breakerpool"
	"fusebox/dynconfig"
	"fusebox/internal/pgtest"
	"fusebox/internal/testwait"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(pgtest.Runner(m))
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

var testKey = breakerpool.Key{TaskGroup: breakerpool.TaskGroupNexusInvocation, NamespaceID: "ns-1", Destination: "ep-1"}

// A config value written on a follower is forwarded to the leader, applied
// on every node, and every node's breaker pool picks it up live.
func TestConfigWrittenOnFollowerAppliesEverywhere(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	for _, n := range c.nodes {
		n.pool.Get(testKey) // a live breaker with default settings
	}
	leader := c.leader(c.nodes)
	follower := others(c.nodes, leader)[0]
	res, err := follower.client().ConfigSet(ctxT(t), dynconfig.KeyBreakerSettings, api.ConfigWrite{
		Destination: "ep-1", Value: json.RawMessage(`{"Timeout":"17s","MaxRequests":2}`),
	})
	if err != nil {
		t.Fatalf("config set on follower: %v", err)
	}
	if res.Index == 0 {
		t.Fatal("write returned no raft index")
	}
	// Read-your-writes on the node that took the write.
	es, err := follower.client().ConfigGet(ctxT(t), dynconfig.KeyBreakerSettings)
	if err != nil || len(es) != 1 || es[0].Destination != "ep-1" {
		t.Fatalf("follower read after its own write: %+v, %v", es, err)
	}
	for _, n := range c.nodes {
		testwait.For(t, 10*time.Second, n.cfg.NodeID+" breaker settings updated", func() bool {
			s := n.pool.Get(testKey).Settings()
			return s.Timeout.D() == 17*time.Second && s.MaxRequests == 2
		})
		es, err := n.client().ConfigGet(ctxT(t), dynconfig.KeyBreakerSettings)
		if err != nil || len(es) != 1 || es[0].Index != res.Index {
			t.Fatalf("%s: config = %+v, %v; want one entry at index %d", n.cfg.NodeID, es, err, res.Index)
		}
	}
	hist, err := leader.client().ConfigHistory(ctxT(t), 10)
	if err != nil || len(hist) == 0 || hist[0].Index != res.Index || hist[0].Key != dynconfig.KeyBreakerSettings {
		t.Fatalf("history = %+v, %v", hist, err)
	}
}

// An invalid value is refused with a 400 naming the key and the field, and
// nothing is written.
func TestInvalidConfigWriteChangesNothing(t *testing.T) {
	c := newTestCluster(t, 1, nil)
	n := c.nodes[0]
	before := n.store.Stats().LastIndex
	_, err := n.client().ConfigSet(ctxT(t), dynconfig.KeyBreakerSettings, api.ConfigWrite{
		Value: json.RawMessage(`{"Timeout":"-5s"}`),
	})
	var apiErr *api.Error
	if !errors.As(err, &apiErr) || apiErr.Status != 400 || apiErr.Key != dynconfig.KeyBreakerSettings || apiErr.Field != "Timeout" {
		t.Fatalf("err = %#v; want 400 naming key and field Timeout", err)
	}
	_, err = n.client().ConfigSet(ctxT(t), "no.such.key", api.ConfigWrite{Value: json.RawMessage(`1`)})
	if !errors.As(err, &apiErr) || apiErr.Status != 404 {
		t.Fatalf("unknown key: err = %v; want 404", err)
	}
	if got := n.store.Stats().LastIndex; got != before {
		t.Fatalf("raft last index moved from %d to %d: something was written", before, got)
	}
	if es := n.store.Reader().Config(); len(es) != 0 {
		t.Fatalf("config table = %+v; want empty", es)
	}
}

// With the leader gone, a new one is elected and writes through any
// surviving node resume.
func TestLeaderKilledWritesResume(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	old := c.leader(c.nodes)
	old.crash()
	live := others(c.nodes, old)
	newLeader := c.leader(live)
	if newLeader == old {
		t.Fatal("old leader still leader")
	}
	for _, n := range live {
		var err error
		testwait.For(t, 20*time.Second, "a write through "+n.cfg.NodeID, func() bool {
			_, err = n.client().PutEndpoint(ctxT(t), api.Endpoint{Name: "ep-" + n.cfg.NodeID, URL: "http://127.0.0.1:9/x"})
			return err == nil
		})
	}
	for _, n := range live {
		testwait.For(t, 10*time.Second, n.cfg.NodeID+" sees both endpoints", func() bool { return len(n.store.Reader().Endpoints()) == 2 })
	}
}

// A restarted node keeps the replicated state from its data dir.
func TestRestartKeepsState(t *testing.T) {
	c := newTestCluster(t, 1, nil)
	n := c.nodes[0]
	if _, err := n.client().PutEndpoint(ctxT(t), api.Endpoint{Name: "keep-me", URL: "https://example.invalid/nexus"}); err != nil {
		t.Fatal(err)
	}
	n.stop()
	n2 := n.restart()
	testwait.For(t, 20*time.Second, "restarted node ready", func() bool { ok, _ := n2.ready(); return ok })
	e, err := n2.client().Endpoint(ctxT(t), "keep-me")
	if err != nil || e.URL != "https://example.invalid/nexus" {
		t.Fatalf("after restart: %+v, %v", e, err)
	}
}

// A data dir belongs to the node that created it.
func TestDataDirBelongsToOneNode(t *testing.T) {
	dir := t.TempDir()
	if err := claimDataDir(dir, "a"); err != nil {
		t.Fatal(err)
	}
	if err := claimDataDir(dir, "a"); err != nil {
		t.Fatalf("same node again: %v", err)
	}
	if err := claimDataDir(dir, "b"); err == nil {
		t.Fatal("another node id claimed the data dir")
	}
	if b, _ := os.ReadFile(filepath.Join(dir, nodeIDFile)); string(b) != "a\n" {
		t.Fatalf("node-id file = %q", b)
	}
}

// A bare admin token guards every call: 401 without or with a wrong one,
// reads included.
func TestAdminToken(t *testing.T) {
	c := newTestCluster(t, 1, func(cfg *Config) { cfg.AdminToken = "s3cret" })
	n := c.nodes[0]
	ep := api.Endpoint{Name: "e", URL: "http://127.0.0.1:9/"}
	var apiErr *api.Error
	_, err := api.NewClient(n.HTTPAddr(), "", nil).PutEndpoint(ctxT(t), ep)
	if !errors.As(err, &apiErr) || apiErr.Status != 401 {
		t.Fatalf("no token: %v; want 401", err)
	}
	_, err = api.NewClient(n.HTTPAddr(), "wrong", nil).PutEndpoint(ctxT(t), ep)
	if !errors.As(err, &apiErr) || apiErr.Status != 401 {
		t.Fatalf("wrong token: %v; want 401", err)
	}
	if _, err := api.NewClient(n.HTTPAddr(), "", nil).Endpoints(ctxT(t)); !errors.As(err, &apiErr) || apiErr.Status != 401 {
		t.Fatalf("read without token: %v; want 401", err)
	}
	if _, err := n.client().Endpoints(ctxT(t)); err != nil {
		t.Fatalf("read with the token: %v", err)
	}
	if _, err := n.client().PutEndpoint(ctxT(t), ep); err != nil {
		t.Fatalf("right token: %v", err)
	}
}

// A forced open through any node reaches every node's pool; auto clears it.
func TestForceBreakerClusterWide(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	var out api.ForcedBreaker
	err := c.nodes[2].client().Do(ctxT(t), "POST", "/v1/breakers/force", nil, api.BreakerForce{
		TaskGroup: testKey.TaskGroup, Namespace: testKey.NamespaceID, Destination: testKey.Destination, Mode: "open", Duration: "10m", Reason: "test",
	}, &out)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range c.nodes {
		testwait.For(t, 10*time.Second, n.cfg.NodeID+" forced open", func() bool {
			b, ok := n.pool.Lookup(testKey)
			return ok && b.Status().Mode == breakerpool.ModeForcedOpen && b.State().String() == "open"
		})
		if _, err := n.pool.Get(testKey).Allow(); !breakerpool.IsCircuitBreakerOpen(err) {
			t.Fatalf("%s: Allow on a forced-open breaker: %v", n.cfg.NodeID, err)
		}
	}
	var list api.BreakerList
	if err := c.nodes[0].client().Do(ctxT(t), "GET", "/v1/breakers", map[string][]string{"scope": {"cluster"}}, nil, &list); err != nil {
		t.Fatal(err)
	}
	if len(list.Breakers) != 3 || len(list.Unreachable) != 0 {
		t.Fatalf("cluster scope: %d breakers, unreachable %v; want 3 and none", len(list.Breakers), list.Unreachable)
	}
	err = c.nodes[1].client().Do(ctxT(t), "POST", "/v1/breakers/force", nil, api.BreakerForce{
		TaskGroup: testKey.TaskGroup, Namespace: testKey.NamespaceID, Destination: testKey.Destination, Mode: "auto",
	}, &out)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range c.nodes {
		testwait.For(t, 10*time.Second, n.cfg.NodeID+" back to auto", func() bool {
			b, _ := n.pool.Lookup(testKey)
			return b.Status().Mode == breakerpool.ModeAuto
		})
	}
}
