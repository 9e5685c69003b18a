package ownership

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"fusebox/internal/testwait"
	"fusebox/raftstore"
	"fusebox/shardmap"
)

// unownedGauge reads fusebox_shards_unowned from a node's registry.
func unownedGauge(t testing.TB, reg *prometheus.Registry) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "fusebox_shards_unowned" {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatal("fusebox_shards_unowned is not exported")
	return 0
}

// Which owners count as unowned: "", failed, left and unknown members;
// alive and suspect ones own their shards.
func TestUnownedCountsOwnersWithoutLiveMember(t *testing.T) {
	if n := unowned(nil, nil); n != 0 {
		t.Fatalf("no map: %d unowned, want 0", n)
	}
	m, err := shardmap.New(6)
	if err != nil {
		t.Fatal(err)
	}
	for i, o := range []string{"", "alive", "suspect", "failed", "left", "ghost"} {
		m.Shards[i].Owner = o
	}
	members := []raftstore.Member{
		{ID: "alive", Status: raftstore.MemberAlive}, {ID: "suspect", Status: raftstore.MemberSuspect},
		{ID: "failed", Status: raftstore.MemberFailed}, {ID: "left", Status: raftstore.MemberLeft},
		{ID: "", Status: raftstore.MemberAlive},
	}
	if n := unowned(m, members); n != 4 {
		t.Fatalf("%d unowned, want 4 (\"\", failed, left, ghost)", n)
	}
}

// The gauge, end to end on in-process nodes: 0 while every shard has a live
// owner (suspects included); when two of three nodes fail the survivor has
// no quorum to re-place their shards, and it reports exactly those shards
// until a node comes back and the leader moves them.
func TestShardsUnownedGauge(t *testing.T) {
	c := newCluster(t)
	for _, id := range []string{"a", "b", "c"} {
		c.start(id, 3, 16)
	}
	testwait.For(t, 20*time.Second, "converged on a, b, c", func() bool { return c.converged("a", "b", "c") })
	for id, n := range c.nodes {
		if v := unownedGauge(t, n.reg); v != 0 {
			t.Fatalf("%s reports %v unowned shards in a healthy cluster", id, v)
		}
		if v := testutil.ToFloat64(n.own.metrics.owned); int(v) != len(n.own.Owned()) {
			t.Fatalf("%s: fusebox_shards_owned %v, owns %d", id, v, len(n.own.Owned()))
		}
	}
	c.members.setStatus("c", raftstore.MemberSuspect)
	if v := unownedGauge(t, c.nodes["a"].reg); v != 0 {
		t.Fatalf("a suspect owner's shards counted as unowned: %v", v)
	}
	c.members.setStatus("c", raftstore.MemberAlive)

	// Keep a node that is not the leader, so neither of the two stopped ones
	// can have committed anything after the survivor's last map.
	survivor := ""
	for id, n := range c.nodes {
		if n.store.State().String() != "Leader" {
			survivor = id
		}
	}
	a := c.nodes[survivor]
	var gone []string
	for _, id := range []string{"a", "b", "c"} {
		if id != survivor {
			gone = append(gone, id)
			c.stop(id, raftstore.MemberFailed)
		}
	}
	// (The first stop may let the other two re-place its shards before the
	// second; the survivor's map then changes once more, hence the wait.)
	var lost int
	var v float64
	testwait.For(t, 10*time.Second, "the survivor to report the failed nodes' shards", func() bool {
		lost = 16 - len(a.own.Holder().Load().OwnedBy(survivor))
		v = unownedGauge(t, a.reg)
		return lost > 0 && v == float64(lost)
	})

	// One comes back: quorum again, the leader re-places the failed node's
	// shards and the gauge returns to 0 on both.
	t.Logf("survivor %s reports %v unowned shards (owned by %v)", survivor, v, gone)
	c.start(gone[0], 3, 16)
	testwait.For(t, 30*time.Second, "shards re-placed on the two live nodes", func() bool {
		return c.converged(survivor, gone[0])
	})
	for id, n := range c.nodes {
		if v := unownedGauge(t, n.reg); v != 0 {
			t.Fatalf("%s reports %v unowned shards after re-placement", id, v)
		}
	}
}
