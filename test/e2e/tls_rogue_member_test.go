package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"fusebox/cluster"
	"fusebox/internal/gossiptest"
	"fusebox/internal/testwait"
)

// TestTLSRogueMemberGetsNoToken: whoever holds the gossip key but no node
// certificate joins the gossip of a TLS cluster advertising an http://
// address of its own. A ?scope=cluster read, which calls every member's
// API with the node's token, must not call it: before members' addresses
// were held to plain host:port, that read sent the node's bearer token to
// the rogue in clear. The refused metadata is counted.
func TestTLSRogueMemberGetsNoToken(t *testing.T) {
	c, pki := newTLSCluster(t)
	c.WaitForLeader(t, leaderTimeout)
	victim := c.Followers(t)[0]
	m0, err := scrapeMetrics(victim)
	if err != nil {
		t.Fatal(err)
	}

	var calls atomic.Int64
	var token atomic.Value
	rogueAPI := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		token.Store(r.Header.Get("Authorization"))
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"breakers":[]}`)
	}))
	t.Cleanup(rogueAPI.Close)

	keys, err := cluster.LoadKeyFile(pki.gossipKeyFile)
	if err != nil {
		t.Fatal(err)
	}
	gossiptest.Join(t, "rogue", fmt.Appendf(nil, `{"id":"rogue","http":%q}`, rogueAPI.URL), keys, victim.cfg.GossipAddr)
	ctx := context.Background()
	var rogueHTTP string
	testwait.ForErr(t, 20*time.Second, "the victim to list the rogue member", func() error {
		ms, err := victim.Client().Members(ctx)
		if err != nil {
			return err
		}
		for _, m := range ms {
			if m.ID == "rogue" {
				rogueHTTP = m.HTTPAddr
				return nil
			}
		}
		return fmt.Errorf("no member rogue among %d", len(ms))
	})
	if _, err := victim.Client().Breakers(ctx, true); err != nil {
		t.Logf("breakers ?scope=cluster: %v", err) // a partial answer is fine; what matters is who was called
	}
	if n := calls.Load(); n != 0 {
		t.Fatalf("the rogue's http:// API was called %d times (Authorization %q)", n, token.Load())
	}
	if rogueHTTP != "" {
		t.Errorf("the rogue is listed with HTTP address %q, want none (its metadata refused)", rogueHTTP)
	}
	m1, err := scrapeMetrics(victim)
	if err != nil {
		t.Fatal(err)
	}
	if d := metricSum(m1, "fusebox_cluster_messages_dropped_total", `reason="bad_metadata"`) - metricSum(m0, "fusebox_cluster_messages_dropped_total", `reason="bad_metadata"`); d < 1 {
		t.Errorf("fusebox_cluster_messages_dropped_total{reason=bad_metadata} rose by %v, want ≥ 1", d)
	}
	c.StopAll(t)
}
