package node

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sony/gobreaker/v2"

	"fusebox/api"
	"fusebox/breakerpool"
	"fusebox/dynconfig"
	"fusebox/healthprobe"
	"fusebox/internal/testwait"
	"fusebox/raftstore/state"
	"fusebox/transport/transporttest"
)

// Active health checks (issue 19 §4), in process: three real nodes, real
// Raft and memberlist on loopback, a real destination.

// healthKey is the breaker key of deliveryNS's echo tasks through ep.
func healthKey(ep string) breakerpool.Key {
	return breakerpool.Key{TaskGroup: breakerpool.TaskGroupNexusInvocation, NamespaceID: deliveryNS, Destination: ep}
}

// allOpen reports whether every node's breaker for k is open.
func allOpen(nodes []*Node, k breakerpool.Key) bool {
	for _, n := range nodes {
		b, ok := n.pool.Lookup(k)
		if !ok || b.State() != gobreaker.StateOpen {
			return false
		}
	}
	return true
}

// healthChecks sums fusebox_health_checks_total{role} over nodes.
func healthChecks(tb testing.TB, nodes []*Node, role string) int {
	tb.Helper()
	total := 0
	for _, n := range nodes {
		mfs, err := n.reg.Gather()
		if err != nil {
			tb.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() != "fusebox_health_checks_total" {
				continue
			}
			for _, m := range mf.GetMetric() {
				for _, l := range m.GetLabel() {
					if l.GetName() == "role" && l.GetValue() == role {
						total += int(m.GetCounter().GetValue())
					}
				}
			}
		}
	}
	return total
}

// startHealthOutage starts 3 nodes, registers ep with a health check (interval
// 300ms) on dest, sets the breakers' Timeout to 300ms, takes dest down,
// submits 60 tasks and waits until every node's breaker is open. It returns
// the task ids and the real tasks the destination had received by then.
func startHealthOutage(t *testing.T, ep string) (*testCluster, *transporttest.Destination, []string, int) {
	t.Helper()
	c := newTestCluster(t, 3, nil)
	dest := transporttest.NewDestination(t)
	if _, err := c.nodes[0].client().PutEndpoint(ctxT(t), api.Endpoint{Name: ep, URL: dest.NexusURL(),
		Health: &api.EndpointHealth{URL: dest.HealthURL(), Interval: "300ms", Timeout: "200ms"}}); err != nil {
		t.Fatal(err)
	}
	setConfig(t, c.nodes, dynconfig.KeyBreakerSettings, ep, `{"Timeout":"300ms","FailureThreshold":3}`)
	testwait.For(t, 10*time.Second, "the endpoint on every node", func() bool {
		for _, n := range c.nodes {
			if e, ok := n.store.Reader().Endpoint(ep); !ok || e.Health == nil {
				return false
			}
		}
		return true
	})
	if err := dest.SetMode(transporttest.ModeUnavailable); err != nil {
		t.Fatal(err)
	}
	sub := newSubmitter(t, c.nodes)
	var ids []string
	for i := range 60 {
		id, err := sub.submit(echoTask(ep, fmt.Sprintf("wf-h-%d", i), fmt.Sprintf("h-%d", i)))
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	testwait.For(t, 30*time.Second, "every node's breaker open", func() bool { return allOpen(liveNodes(c.nodes), healthKey(ep)) })
	return c, dest, ids, dest.Count(transporttest.KindStart)
}

func liveNodes(tns []*testNode) []*Node {
	var out []*Node
	for _, n := range tns {
		out = append(out, n.Node)
	}
	return out
}

// While a Nexus endpoint with a health check is down, no task is spent on
// probing once every node's breaker is open (the breakers' own Timeout is
// 300ms, the outage lasts many of them): only the probe owner calls the
// health URL. When the destination is back, a passed check resumes
// delivery and every task succeeds; the breaker list shows the last check.
func TestHealthCheckSparesTasksDuringOutage(t *testing.T) {
	const ep = "ep-health"
	c, dest, ids, spent := startHealthOutage(t, ep)
	nodes, k := liveNodes(c.nodes), healthKey(ep)
	// Many breaker Timeouts and health intervals of outage.
	testwait.For(t, 30*time.Second, "8 owner health checks", func() bool { return healthChecks(t, nodes, healthprobe.RoleOwner) >= 8 })
	if got := dest.Count(transporttest.KindStart); got != spent {
		t.Fatalf("%d tasks were spent on probing while the breakers were open", got-spent)
	}
	if !allOpen(nodes, k) {
		t.Fatal("a breaker left open during the outage")
	}
	owner := c.nodes[0].hints.Owner(k)
	var ownerNode *testNode
	for _, n := range c.nodes {
		if n.cfg.NodeID == owner {
			ownerNode = n
		}
	}
	var list api.BreakerList
	if err := json.Unmarshal([]byte(getRaw(t, ownerNode, "/v1/breakers")), &list); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, b := range list.Breakers {
		if b.Destination == ep && b.Health != nil && b.Health.Result == healthprobe.ResultFail && b.Health.Role == healthprobe.RoleOwner && b.Health.Status == 503 {
			found = true
		}
	}
	if !found {
		t.Fatalf("the owner's breaker list shows no failed health check: %+v", list.Breakers)
	}

	if err := dest.SetMode(transporttest.ModeUp); err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		waitTask(t, c.nodes[0], id, "succeeded after the recovery", func(tk api.Task) bool { return tk.Status == state.TaskSucceeded })
	}
}

// When the probe owner leaves during the outage, the node that takes over
// its probe ownership checks the health URL instead of warm-starting its
// breaker with a real task; delivery still resumes after the recovery.
func TestHealthCheckOwnerLeaves(t *testing.T) {
	const ep = "ep-health-leave"
	c, dest, ids, spent := startHealthOutage(t, ep)
	k := healthKey(ep)
	owner := c.nodes[0].hints.Owner(k)
	var rest []*testNode
	for _, n := range c.nodes {
		if n.cfg.NodeID == owner {
			n.stop()
		} else {
			rest = append(rest, n)
		}
	}
	nodes := liveNodes(rest)
	testwait.For(t, 30*time.Second, "a new probe owner", func() bool {
		o := rest[0].hints.Owner(k)
		return o != owner && o == rest[1].hints.Owner(k)
	})
	before := healthChecks(t, nodes, healthprobe.RoleOwner)
	testwait.For(t, 30*time.Second, "5 checks by the new owner", func() bool { return healthChecks(t, nodes, healthprobe.RoleOwner) >= before+5 })
	if got := dest.Count(transporttest.KindStart); got != spent {
		t.Fatalf("%d tasks were spent on the down destination after the owner left", got-spent)
	}
	if !allOpen(nodes, k) {
		t.Fatal("a breaker left open during the outage")
	}
	if err := dest.SetMode(transporttest.ModeUp); err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		waitTask(t, rest[0], id, "succeeded after the recovery", func(tk api.Task) bool { return tk.Status == state.TaskSucceeded })
	}
}

// PUT /v1/endpoints/{name} validates the health check with errors naming
// the field, refuses a health URL the outbound policy refuses (a member's
// address) like the endpoint URL, and reads it back canonicalised and
// redacted.
func TestEndpointHealthAPI(t *testing.T) {
	c := newTestCluster(t, 1, nil)
	n := c.nodes[0]
	put := func(h api.EndpointHealth) error {
		_, err := n.client().PutEndpoint(ctxT(t), api.Endpoint{Name: "ep", URL: "http://127.0.0.1:9/nexus", Health: &h})
		return err
	}
	wantField(t, put(api.EndpointHealth{URL: "http://" + n.HTTPAddr() + "/healthz"}), "health.url")
	wantField(t, put(api.EndpointHealth{URL: "http://u:p@127.0.0.1:9/h"}), "health.url")
	wantField(t, put(api.EndpointHealth{URL: "ftp://127.0.0.1:9/h"}), "health.url")
	wantField(t, put(api.EndpointHealth{URL: "http://127.0.0.1:9/h", Interval: "1ms"}), "health.interval")
	wantField(t, put(api.EndpointHealth{URL: "http://127.0.0.1:9/h", Timeout: "forever"}), "health.timeout")
	wantField(t, put(api.EndpointHealth{URL: "http://127.0.0.1:9/h", HealthyStatus: 42}), "health.healthy_status")
	if err := put(api.EndpointHealth{URL: "http://127.0.0.1:9/h?token=secret", Interval: "5s"}); err != nil {
		t.Fatal(err)
	}
	raw := getRaw(t, n, "/v1/endpoints/ep")
	if strings.Contains(raw, "secret") {
		t.Fatalf("health URL not redacted: %s", raw)
	}
	var e api.Endpoint
	if err := json.Unmarshal([]byte(raw), &e); err != nil {
		t.Fatal(err)
	}
	if e.Health == nil || e.Health.Interval != "5s" || e.Health.Timeout != "2s" || e.Health.HealthyStatus != 200 ||
		!strings.HasPrefix(e.Health.URL, "http://127.0.0.1:9/h?") {
		t.Fatalf("health read back as %+v", e.Health)
	}
}

// fusebox.destination.healthPath gives a callback destination (its
// scheme://host, the breaker's destination) a health check; other hosts
// and Nexus keys without a registered check have none.
func TestCallbackHealthPathFromConfig(t *testing.T) {
	c := newTestCluster(t, 1, nil)
	n := c.nodes[0]
	host := "http://127.0.0.1:9"
	setConfig(t, c.nodes, dynconfig.KeyDestinationHealthPath, host, `"/healthz"`)
	k := breakerpool.Key{TaskGroup: breakerpool.TaskGroupCallback, NamespaceID: deliveryNS, Destination: host}
	// The node's config view follows the applied entry asynchronously.
	testwait.For(t, 10*time.Second, "the health path in the node's config", func() bool {
		_, ok := n.healthCheckOf(k)
		return ok
	})
	got, ok := n.healthCheckOf(k)
	if !ok || got.URL != host+"/healthz" || got.Interval != state.HealthDefaultInterval || got.HealthyStatus != 200 {
		t.Fatalf("check %+v, %v", got, ok)
	}
	if _, ok := n.healthCheckOf(breakerpool.Key{TaskGroup: breakerpool.TaskGroupCallback, NamespaceID: deliveryNS, Destination: "http://127.0.0.1:10"}); ok {
		t.Fatal("another host has a health check")
	}
	if _, ok := n.healthCheckOf(healthKey("no-such-endpoint")); ok {
		t.Fatal("an unknown endpoint has a health check")
	}
	wantFieldConfig := func(value string) {
		t.Helper()
		_, err := n.client().ConfigSet(ctxT(t), dynconfig.KeyDestinationHealthPath, api.ConfigWrite{Destination: host, Value: json.RawMessage(value)})
		if err == nil {
			t.Fatalf("health path %s accepted", value)
		}
	}
	wantFieldConfig(`"http://evil.example/x"`)
	wantFieldConfig(`"no-slash"`)
}
