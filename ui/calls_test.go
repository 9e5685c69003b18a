package ui_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"fusebox/breakerpool"
	"fusebox/ui"
)

// TestCallsFromRealPool: GET /ui/api/calls reads a real pool's
// fusebox_breaker_requests_total per key; the cluster scope merges a peer's
// answer re-tagged with the member asked, destinations redacted, and lists
// a member that does not answer.
func TestCallsFromRealPool(t *testing.T) {
	reg := prometheus.NewRegistry()
	pool, err := breakerpool.New(breakerpool.Config{}, nil, reg, nil)
	if err != nil {
		t.Fatal(err)
	}
	pool.Start()
	t.Cleanup(pool.Close)
	k := breakerpool.Key{TaskGroup: breakerpool.TaskGroupNexusInvocation, NamespaceID: "ns1", Destination: "down-api"}
	b := pool.Get(k)
	for range 2 {
		done, err := b.Allow()
		if err != nil {
			t.Fatal(err)
		}
		done(true)
	}
	tripBreaker(t, pool, k) // failures until it opens
	if _, err := b.Allow(); err == nil {
		t.Fatal("open breaker admitted a call")
	}

	n1 := ui.New(ui.Deps{NodeID: "n1", Gatherer: reg}, nil)
	var local ui.CallList
	if err := json.Unmarshal(serve(t, n1, http.MethodGet, "/ui/api/calls", nil).Body.Bytes(), &local); err != nil {
		t.Fatal(err)
	}
	if len(local.Nodes) != 1 || local.Nodes[0].Node != "n1" || len(local.Nodes[0].Keys) != 1 {
		t.Fatalf("local calls %+v, want n1's one key", local)
	}
	c := local.Nodes[0].Keys[0]
	if c.Destination != "down-api" || c.Success != 2 || c.Failure < 1 || c.Rejected < 1 || local.At.IsZero() {
		t.Errorf("calls of %s: %+v, want 2 successes, the failures that tripped it and a rejection", k, c)
	}

	// A second node whose peer is n1 over real HTTP, and a member that is gone.
	srv := startServer(t, n1)
	members := staticMembers{
		{ID: "n1", HTTPAddr: srv.Listener.Addr().String(), State: "alive"},
		{ID: "n2", State: "alive"},
		{ID: "n3", HTTPAddr: deadAddr(t), State: "alive"},
	}
	n2 := ui.New(ui.Deps{NodeID: "n2", Members: members, Peers: peerClients(t)}, nil)
	var cl ui.CallList
	if err := json.Unmarshal(serve(t, n2, http.MethodGet, "/ui/api/calls?scope=cluster", nil).Body.Bytes(), &cl); err != nil {
		t.Fatal(err)
	}
	if len(cl.Nodes) != 2 || cl.Nodes[0].Node != "n1" || len(cl.Nodes[0].Keys) != 1 || cl.Nodes[0].Keys[0].Success != 2 ||
		cl.Nodes[1].Node != "n2" || len(cl.Nodes[1].Keys) != 0 || len(cl.Unreachable) != 1 || cl.Unreachable[0] != "n3" {
		t.Errorf("cluster calls %+v, want n1's key, n2 without a registry, n3 unreachable", cl)
	}
	if rec := serve(t, n2, http.MethodGet, "/ui/api/calls?scope=fleet", nil); rec.Code != http.StatusBadRequest {
		t.Errorf("scope=fleet: %d, want 400", rec.Code)
	}
}
