package ui_test

import (
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"fusebox/api"
	"fusebox/ui"
)

// peerClients returns a Peers function over one private transport whose
// idle connections are closed when the test ends.
func peerClients(t testing.TB) func(string) *api.Client {
	hc := &http.Client{Transport: &http.Transport{}, Timeout: 10 * time.Second}
	t.Cleanup(hc.CloseIdleConnections)
	return func(addr string) *api.Client { return api.NewClient(addr, "", hc) }
}

func startServer(t testing.TB, h http.Handler) *httptest.Server {
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

func deadAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return addr
}

func TestClusterTimelineMerged(t *testing.T) {
	base := time.Now().Add(-time.Minute)
	rec1, _ := ui.NewRecorder(0)
	rec2, _ := ui.NewRecorder(0)
	rec1.Observe(transition("a", 1, base.Add(1*time.Second)))
	rec2.Observe(transition("b", 1, base.Add(2*time.Second)))
	rec1.Observe(transition("c", 2, base.Add(3*time.Second)))

	n2 := startServer(t, ui.New(ui.Deps{NodeID: "n2", Recorder: rec2}, nil).Data())
	// n3 answers with entries it should not be trusted on: another node's
	// name, an unknown state, no time. Only the well-formed one is kept,
	// tagged n3.
	n3 := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/ui/api/transitions" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(ui.TransitionList{Scope: "local", Transitions: []ui.Transition{
			{Node: "n1", Destination: "spoof", From: "closed", To: "open", At: base.Add(4 * time.Second), Seq: 3},
			{Node: "n3", Destination: "bad", From: "closed", To: "exploded", At: base.Add(5 * time.Second), Seq: 2},
			{Node: "n3", Destination: "notime", From: "closed", To: "open", Seq: 1},
		}})
	}))
	members := staticMembers{
		{ID: "n1", HTTPAddr: "127.0.0.1:1", State: "alive"}, // self: never asked over HTTP
		{ID: "n2", HTTPAddr: n2.Listener.Addr().String(), State: "alive"},
		{ID: "n3", HTTPAddr: n3.Listener.Addr().String(), State: "alive"},
		{ID: "n4", HTTPAddr: deadAddr(t), State: "alive"},
		{ID: "n5", HTTPAddr: deadAddr(t), State: "dead"},
		{ID: "n6", HTTPAddr: deadAddr(t), State: "left"},
	}
	h := ui.New(ui.Deps{NodeID: "n1", Recorder: rec1, Members: members, Peers: peerClients(t)}, nil).Data()

	rec := serve(t, h, http.MethodGet, "/ui/api/transitions?scope=cluster", nil)
	if rec.Code != http.StatusOK {
		t.Fatalf("status %d: %s", rec.Code, rec.Body)
	}
	var list ui.TransitionList
	if err := json.Unmarshal(rec.Body.Bytes(), &list); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, tr := range list.Transitions {
		got = append(got, tr.Node+":"+tr.Destination)
	}
	want := []string{"n3:spoof", "n1:c", "n2:b", "n1:a"}
	if !slices.Equal(got, want) {
		t.Errorf("merged timeline %v, want %v (newest first, peers' entries tagged with the member asked)", got, want)
	}
	if list.Scope != "cluster" || !slices.Equal(list.Unreachable, []string{"n4", "n5"}) {
		t.Errorf("scope %q unreachable %v, want cluster and [n4 n5] (a dead member is listed, not asked; one that left is neither)", list.Scope, list.Unreachable)
	}
}

func TestClusterTimelineWithoutMembers(t *testing.T) {
	rec1, _ := ui.NewRecorder(0)
	rec1.Observe(transition("a", 1, time.Now()))
	h := ui.New(ui.Deps{NodeID: "solo", Recorder: rec1}, nil).Data()
	var list ui.TransitionList
	if err := json.Unmarshal(serve(t, h, http.MethodGet, "/ui/api/transitions?scope=cluster", nil).Body.Bytes(), &list); err != nil {
		t.Fatal(err)
	}
	if len(list.Transitions) != 1 || list.Transitions[0].Node != "solo" {
		t.Errorf("got %+v, want this node's one transition", list)
	}
	// No recorder at all: an empty list, not null.
	body := serve(t, ui.New(ui.Deps{}, nil).Data(), http.MethodGet, "/ui/api/transitions", nil).Body.String()
	var raw map[string]json.RawMessage
	if err := json.Unmarshal([]byte(body), &raw); err != nil || string(raw["transitions"]) != "[]" {
		t.Errorf("no recorder: %s", body)
	}
}

// A peer that never answers costs the merge PeerTimeout, not the request,
// and is listed as unreachable.
func TestClusterTimelineHangingPeer(t *testing.T) {
	if testing.Short() {
		t.Skip("waits out PeerTimeout")
	}
	hang := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done()
	}))
	rec1, _ := ui.NewRecorder(0)
	rec1.Observe(transition("a", 1, time.Now()))
	members := staticMembers{
		{ID: "n1", State: "alive"},
		{ID: "slow", HTTPAddr: hang.Listener.Addr().String(), State: "alive"},
	}
	h := ui.New(ui.Deps{NodeID: "n1", Recorder: rec1, Members: members, Peers: peerClients(t)}, nil).Data()
	start := time.Now()
	var list ui.TransitionList
	if err := json.Unmarshal(serve(t, h, http.MethodGet, "/ui/api/transitions?scope=cluster", nil).Body.Bytes(), &list); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > ui.PeerTimeout+5*time.Second {
		t.Errorf("merge took %s with a hanging peer", took)
	}
	if len(list.Transitions) != 1 || !slices.Equal(list.Unreachable, []string{"slow"}) {
		t.Errorf("got %d transitions, unreachable %v; want n1's one and [slow]", len(list.Transitions), list.Unreachable)
	}
}
