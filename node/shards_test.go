package node

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"fusebox/api"
	"fusebox/internal/testwait"
	"fusebox/shardmap"
)

// shardsSettled reports whether every node in live serves the same committed
// map version and that map gives every shard to exactly one node of live.
func shardsSettled(t testing.TB, live []*Node) bool {
	ids := map[string]bool{}
	for _, n := range live {
		ids[n.cfg.NodeID] = true
	}
	var ref *api.ShardList
	for _, n := range live {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		l, err := api.NewClient(n.HTTPAddr(), n.cfg.AdminToken, nil).Shards(ctx)
		cancel()
		if err != nil || (ref != nil && l.Version != ref.Version) {
			return false
		}
		ref = &l
	}
	if ref == nil || len(ref.Shards) != ref.NumShards {
		return false
	}
	for _, s := range ref.Shards {
		if !ids[s.Owner] {
			return false
		}
	}
	return true
}

func nodesOf(tns []*testNode) []*Node {
	out := make([]*Node, len(tns))
	for i, tn := range tns {
		out[i] = tn.Node
	}
	return out
}

func ownedBy(t *testing.T, via *testNode, id string) []api.Shard {
	t.Helper()
	ns, err := via.client().NodeShards(ctxT(t), id)
	if err != nil {
		t.Fatalf("node shards of %s: %v", id, err)
	}
	return ns.Shards
}

// After joins, a kill, a restart and a graceful stop, the committed map
// converges each time to exactly one live owner per shard.
func TestShardsConvergeAcrossJoinsKillsRestarts(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	live := append([]*testNode(nil), c.nodes...)
	settle := func(what string, extra func() bool) {
		t.Helper()
		testwait.For(t, 30*time.Second, what, func() bool { return shardsSettled(t, nodesOf(live)) && (extra == nil || extra()) })
	}
	settle("initial placement", nil)

	n4 := startNode(t, testConfig(t, "n4", 0, []string{c.nodes[0].GossipAddr()}))
	live = append(live, n4)
	settle("n4 joined and owns shards", func() bool { return len(ownedBy(t, n4, "n4")) > 0 })

	n2 := c.nodes[1]
	n2.crash()
	live = others(live, n2)
	settle("n2's shards re-owned after the kill", nil)

	n2b := n2.restart()
	live = append(live, n2b)
	settle("restarted n2 owns shards again", func() bool { return len(ownedBy(t, n2b, "n2")) > 0 })

	n3 := c.nodes[2]
	n3.stop() // graceful: drains first
	live = others(live, n3)
	settle("n3's shards re-owned after a graceful stop", nil)
	// Readiness includes freshness, which a node starved of CPU for a
	// moment (2 cores, packages testing in parallel) drops until its next
	// read barrier: wait for it rather than read it once.
	for _, n := range live {
		testwait.For(t, 30*time.Second, n.cfg.NodeID+" ready", func() bool { ok, _ := n.ready(); return ok })
	}
}

// A killed node's shards are re-owned within failure detection plus a
// second (asserted with a generous bound; BenchmarkShardFailover measures).
func TestShardFailoverAfterKill(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	testwait.For(t, 30*time.Second, "initial placement", func() bool { return shardsSettled(t, nodesOf(c.nodes)) })
	leader := c.leader(c.nodes)
	victim := others(c.nodes, leader)[0]
	survivors := others(c.nodes, victim)
	before := ownedBy(t, leader, victim.cfg.NodeID)
	if len(before) == 0 {
		t.Skip("victim owns no shards with this placement")
	}
	start := time.Now()
	victim.crash()
	testwait.For(t, 15*time.Second, "victim's shards re-owned", func() bool { return shardsSettled(t, nodesOf(survivors)) })
	t.Logf("%d shards re-owned %s after the kill", len(before), time.Since(start).Round(time.Millisecond))
	l, err := leader.client().Shards(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range before {
		if now := l.Shards[s.Shard]; now.Epoch <= s.Epoch {
			t.Fatalf("shard %d moved without a new epoch: %+v → %+v", s.Shard, s, now)
		}
	}
}

// Over the API: move pins a shard (a dead target is a 400 naming it), a
// stale close is refused with wrong_owner carrying the current owner and
// epoch, drain empties a node and undrain brings it back, and the pin
// survives a leader change.
func TestShardAdminOverAPI(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	testwait.For(t, 30*time.Second, "initial placement", func() bool { return shardsSettled(t, nodesOf(c.nodes)) })
	leader := c.leader(c.nodes)
	target := others(c.nodes, leader)[0]
	tid := target.cfg.NodeID
	apic := others(c.nodes, leader)[1].client() // writes from a follower are forwarded
	l, err := apic.Shards(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	shard := -1
	for _, s := range l.Shards {
		if s.Owner != tid {
			shard = s.Shard
			break
		}
	}

	var apiErr *api.Error
	if _, err := apic.MoveShard(ctxT(t), shard, "ghost"); !errors.As(err, &apiErr) || apiErr.Status != 400 || apiErr.Field != "node" || !strings.Contains(apiErr.Message, "ghost") {
		t.Fatalf("move to unknown node: %v", err)
	}
	moved, err := apic.MoveShard(ctxT(t), shard, tid)
	if err != nil || moved.Owner != tid || moved.Pinned != tid {
		t.Fatalf("move: %+v, %v", moved, err)
	}

	stale := moved.Epoch - 1
	_, err = apic.CloseShard(ctxT(t), shard, &stale)
	wo, ok := api.AsWrongOwner(err)
	if !ok || !errors.Is(wo, shardmap.ErrWrongOwner) || wo.Shard != shard || wo.Owner != tid || wo.Epoch != moved.Epoch {
		t.Fatalf("stale-epoch close: %v (%+v)", err, wo)
	}
	closed, err := apic.CloseShard(ctxT(t), shard, &moved.Epoch)
	if err != nil || closed.Owner != tid || closed.Epoch != moved.Epoch+2 {
		t.Fatalf("close: %+v, %v", closed, err)
	}

	if _, err := apic.DrainNode(ctxT(t), tid); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 15*time.Second, "target drained", func() bool { return len(ownedBy(t, target, tid)) == 0 })
	if ns, err := apic.UndrainNode(ctxT(t), tid); err != nil || ns.Draining {
		t.Fatalf("undrain: %+v, %v", ns, err)
	}
	testwait.For(t, 15*time.Second, "target back with its pinned shard", func() bool {
		for _, s := range ownedBy(t, target, tid) {
			if s.Shard == shard {
				return true
			}
		}
		return false
	})

	leader.crash()
	rest := others(c.nodes, leader)
	testwait.For(t, 30*time.Second, "settled after the leader change", func() bool { return shardsSettled(t, nodesOf(rest)) })
	d, err := target.client().Shard(ctxT(t), shard)
	if err != nil || d.Owner != tid || d.Pinned != tid || d.Tasks != api.TasksTracked || d.Backlog == nil || *d.Backlog != 0 {
		t.Fatalf("after leader change: %+v, %v", d, err)
	}
}

// A node started with a --shards that differs from the cluster's is not
// ready, says why, and owns nothing.
func TestShardCountMismatchReported(t *testing.T) {
	c := newTestCluster(t, 1, nil)
	cfg := testConfig(t, "n2", 0, []string{c.nodes[0].GossipAddr()})
	cfg.Shards = 32
	n2 := startNode(t, cfg)
	want := fmt.Sprintf("this cluster was created with %d shards; --shards 32 cannot change it", DefaultShards)
	testwait.For(t, 30*time.Second, "mismatch reported", func() bool {
		ok, d := n2.ready()
		why, _ := d["shards"].(string)
		return !ok && strings.Contains(why, want)
	})
	err := n2.client().Do(ctxT(t), "GET", "/readyz", nil, nil, nil)
	var apiErr *api.Error
	if !errors.As(err, &apiErr) || apiErr.Status != 503 {
		t.Fatalf("/readyz: %v; want 503", err)
	}
	testwait.For(t, 15*time.Second, "n2 excluded from placement", func() bool {
		ns, err := c.nodes[0].client().NodeShards(ctxT(t), "n2")
		return err == nil && ns.Draining && ns.DrainReason == "misconfigured" && len(ns.Shards) == 0
	})
}
