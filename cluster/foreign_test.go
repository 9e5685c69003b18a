package cluster

import (
	"testing"
	"time"

	"fusebox/internal/testwait"
)

func withClusterID(id string) func(*Config) {
	return func(c *Config) { c.Meta.ClusterID = id }
}

// A node that advertises another cluster's id never becomes a member: its
// join is refused on both sides (merge), and so are its alive messages,
// so it never sees the cluster nor the cluster it. A fresh node (no id)
// joins as before.
func TestNodeOfAnotherClusterIsRefused(t *testing.T) {
	nodes := startCluster(t, 2, withClusterID("cluster-a"))
	x := startNode(t, "x1", withClusterID("cluster-b"), joining(nodes[0].GossipAddr()))
	testwait.For(t, 20*time.Second, "x1's join refused by both sides", func() bool {
		return counter(t, x.metrics.foreignRefused, "merge") > 0 &&
			counter(t, nodes[0].metrics.foreignRefused, "merge")+counter(t, nodes[0].metrics.foreignRefused, "alive") > 0 &&
			counter(t, x.metrics.joinAttempts, "error") > 0
	})
	fresh := startNode(t, "f1", joining(nodes[0].GossipAddr()))
	waitConverged(t, []testNode{nodes[0], nodes[1], fresh}, 3)
	if n := x.NumAlive(); n != 1 {
		t.Errorf("x1 sees %d alive members, want only itself", n)
	}
	for _, n := range append(nodes, fresh) {
		if _, ok := n.Member("x1"); ok {
			t.Errorf("%s knows x1, a node of another cluster", n.cfg.NodeID)
		}
	}
	// The fresh node takes the cluster's id, as a node does once it has
	// applied the cluster's state: still a member.
	if err := fresh.UpdateMeta(func(m *Meta) { m.ClusterID = "cluster-a" }); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 10*time.Second, "the fresh node's id seen by n0", func() bool {
		m, ok := nodes[0].Member("f1")
		return ok && m.Meta.ClusterID == "cluster-a" && m.State == StateAlive
	})
	if n := nodes[0].NumAlive(); n != 3 {
		t.Errorf("n0 sees %d alive, want 3", n)
	}
}
