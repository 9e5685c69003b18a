package ui_test

import (
	"encoding/json"
	"net/http"
	"sync/atomic"
	"testing"

	"fusebox/ui"
)

// FuzzPeerHistory: whatever a peer answers to GET /ui/api/history, the
// cluster merge never panics, keeps within its bounds, tags the samples
// with the member asked and drops the peer's shard owners; an answer that
// does not decode lists the peer as unreachable.
func FuzzPeerHistory(f *testing.F) {
	f.Add([]byte(`{"scope":"local","node":"n1","interval_seconds":2,"nodes":[{"node":"n1","samples":[{"at":"2026-01-02T03:04:05Z","calls":[{"task_group":"callbacks.Invocation","namespace":"ns","destination":"http://u:p@h/x?sig=1","calls":3,"failures":1,"rejected":2}],"shards":{"n1":4}}]}]}`))
	f.Add([]byte(`{"nodes":[{"node":"n9","samples":[{"at":"0001-01-01T00:00:00Z"},{"calls":null}]}]}`))
	f.Add([]byte(`{"nodes":[]}`))
	f.Add([]byte(`not json`))
	var body atomic.Value
	body.Store([]byte(nil))
	peer := startServer(f, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(body.Load().([]byte))
	}))
	members := staticMembers{{ID: "n1", State: "alive"}, {ID: "peer", HTTPAddr: peer.Listener.Addr().String(), State: "alive"}}
	h := ui.New(ui.Deps{NodeID: "n1", Members: members, Peers: peerClients(f)}, nil).Data()
	f.Fuzz(func(t *testing.T, b []byte) {
		body.Store(b)
		rec := serve(t, h, http.MethodGet, "/ui/api/history?scope=cluster", nil)
		var out ui.HistoryList
		if rec.Code != http.StatusOK || json.Unmarshal(rec.Body.Bytes(), &out) != nil {
			t.Fatalf("merge answered %d: %s", rec.Code, rec.Body)
		}
		for _, n := range out.Nodes {
			if n.Node != "n1" && n.Node != "peer" {
				t.Fatalf("a node the peer named itself: %q", n.Node)
			}
			if len(n.Samples) > ui.MaxHistorySamples {
				t.Fatalf("%d samples from %s", len(n.Samples), n.Node)
			}
			for _, s := range n.Samples {
				if n.Node == "peer" && (s.Shards != nil || s.At.IsZero() || len(s.Calls) > ui.MaxSampleKeys) {
					t.Fatalf("peer sample kept out of bounds: %+v", s)
				}
			}
		}
	})
}
