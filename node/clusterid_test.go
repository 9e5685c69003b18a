package node

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"fusebox/api"
	"fusebox/dynconfig"
	"fusebox/internal/testwait"
)

// TestForeignNodeIsNotAdded: a node restarted on the data dir of another
// cluster (A: one node, with a history of terms) with --join pointing at
// cluster B. Before, B's leader added it to the Raft configuration and,
// with the higher term of its own history, it led B within a second: B's
// replicas then applied its entries on top of B's state, and it on top of
// A's, so they disagreed from there on. Now each side sees the other's
// cluster id in gossip and refuses it as a member (its join fails): B
// keeps its three servers, its leader and its state, the stranger stays
// alone with A's, and B places no shard on it. The data dirs record their
// cluster ids.
func TestForeignNodeIsNotAdded(t *testing.T) {
	a := startNode(t, testConfig(t, "x1", 1, nil))
	waitNodeReady(t, a)
	configSet(t, a, dynconfig.KeyBreakerSettings, "a-only", `{"Timeout":"17s"}`)
	for range 3 { // terms: A's history is ahead of B's
		a.stop()
		a = a.restart()
		waitNodeReady(t, a)
	}
	aID := a.state.ClusterID()
	testwait.For(t, 10*time.Second, "A's cluster id in its data dir", func() bool {
		id, _ := readClusterID(a.cfg.DataDir)
		return id == aID && aID != ""
	})
	a.stop()

	b := newTestCluster(t, 3, nil)
	configSet(t, b.nodes[0], dynconfig.KeyBreakerSettings, "b-only", `{"Timeout":"18s"}`)
	bID := b.nodes[0].state.ClusterID()
	if bID == "" || bID == aID {
		t.Fatalf("cluster ids A %q, B %q", aID, bID)
	}
	cfg := a.cfg
	cfg.Join = []string{b.nodes[0].GossipAddr()}
	x := startNode(t, cfg)
	testwait.For(t, 20*time.Second, "x1's join refused by B", func() bool {
		return counterValue(t, b.nodes[0].reg, "fusebox_cluster_foreign_refused_total") > 0
	})
	check := func() error {
		for _, n := range b.nodes {
			servers, err := n.store.Configuration()
			if err != nil {
				return err
			}
			if len(servers) != 3 {
				return fmt.Errorf("%s: B's configuration has %d servers: %+v", n.cfg.NodeID, len(servers), servers)
			}
			if hasEntry(n, "a-only") {
				return fmt.Errorf("%s holds A's config", n.cfg.NodeID)
			}
			if sm := n.shards.Holder().Load(); sm != nil {
				for _, s := range sm.Shards {
					if s.Owner == "x1" {
						return fmt.Errorf("%s: shard %d placed on x1", n.cfg.NodeID, s.Shard)
					}
				}
			}
		}
		if hasEntry(x, "b-only") {
			return fmt.Errorf("x1 holds B's config")
		}
		if ld, _ := b.nodes[0].store.Leader(); ld == "x1" {
			return fmt.Errorf("x1 leads B")
		}
		return nil
	}
	// Before, the mix was there within a second of the join; watch three,
	// through several reconcile passes and placements.
	until := time.Now().Add(3 * time.Second)
	testwait.ForErr(t, 10*time.Second, "three seconds with B and A apart", func() error {
		if err := check(); err != nil {
			t.Fatal(err)
		}
		if time.Now().Before(until) {
			return fmt.Errorf("watching")
		}
		return nil
	})
	// B still takes writes, and x1 still serves A.
	if _, err := b.nodes[1].client().ConfigSet(ctxT(t), dynconfig.KeyBreakerSettings, api.ConfigWrite{Namespace: "b-after", Value: json.RawMessage(`{"Timeout":"19s"}`)}); err != nil {
		t.Fatal(err)
	}
	for _, n := range b.nodes {
		if id, err := readClusterID(n.cfg.DataDir); err != nil || id != bID {
			t.Errorf("%s: data dir cluster id %q (%v), want %q", n.cfg.NodeID, id, err, bID)
		}
	}
}

// hasEntry: n's replica holds a config entry of namespace ns.
func hasEntry(n *testNode, ns string) bool {
	for _, e := range n.store.Reader().Config() {
		if e.Namespace == ns {
			return true
		}
	}
	return false
}
