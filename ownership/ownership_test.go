package ownership

import (
	"errors"
	"strings"
	"testing"
	"time"

	"fusebox/internal/testwait"
	"fusebox/raftstore"
	"fusebox/raftstore/state"
	"fusebox/shardmap"
)

// A single node creates the shard count from its flag, commits the first map
// with every shard on itself and becomes ready.
func TestSingleNodeOwnsEverything(t *testing.T) {
	c := newCluster(t)
	a := c.start("a", 1, 8)
	testwait.For(t, 10*time.Second, "ready", func() bool { ok, _ := a.own.Ready(); return ok })
	if n := a.store.Reader().ShardCount(); n != 8 {
		t.Fatalf("shard count = %d, want 8", n)
	}
	owned := a.own.Owned()
	if len(owned) != 8 {
		t.Fatalf("owned = %v, want all 8 shards", owned)
	}
	for s, e := range owned {
		if err := a.own.CheckEpoch(s, e); err != nil {
			t.Fatalf("own epoch refused: %v", err)
		}
		if err := a.own.CheckEpoch(s, e+1); !errors.Is(err, shardmap.ErrWrongOwner) {
			t.Fatalf("wrong epoch accepted: %v", err)
		}
	}
	// Nobody else can take the shards, so Drain returns at once.
	if err := a.own.Drain(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	if len(a.store.Reader().DrainingNodes()) != 0 {
		t.Fatalf("a lone node marked itself draining: %+v", a.store.Reader().DrainingNodes())
	}
}

// The committed map follows membership: a dead member's shards (only those)
// go to the survivors with new epochs; a suspect keeps its shards; a
// restarted member gets shards back.
func TestPlacementFollowsMembership(t *testing.T) {
	c := newCluster(t)
	for _, id := range []string{"a", "b", "c"} {
		c.start(id, 3, 32)
	}
	testwait.For(t, 20*time.Second, "converged on a, b, c", func() bool { return c.converged("a", "b", "c") })
	before := c.nodes["a"].own.Holder().Load()

	// Suspect: c keeps its shards even though placement runs (moving one of
	// a's shards to b makes the leader commit a new placement).
	c.members.setStatus("c", raftstore.MemberSuspect)
	aShard := before.OwnedBy("a")[0]
	if got, err := c.nodes["a"].own.Move(ctxT(t), aShard, "b", "test"); err != nil || got.Owner != "b" {
		t.Fatalf("move: %+v, %v", got, err)
	}
	if _, err := c.nodes["a"].own.Unpin(ctxT(t), aShard, "test"); err != nil {
		t.Fatal(err)
	}
	// Placement is balanced (each of a, b, c owns 10 or 11 of the 32) once
	// the leader has placed after the unpin; the shard may stay on b.
	testwait.For(t, 10*time.Second, "unpinned and balanced again", func() bool {
		if !c.converged("a", "b", "c") {
			return false
		}
		m := c.nodes["a"].own.Holder().Load()
		for _, id := range []string{"a", "b", "c"} {
			if n := len(m.OwnedBy(id)); n < 10 || n > 11 {
				return false
			}
		}
		return m.Shards[aShard].Pinned == ""
	})
	placed := c.nodes["a"].own.Holder().Load()
	for _, s := range before.OwnedBy("c") {
		if a := placed.Shards[s]; a.Owner != "c" || a.Epoch != before.Shards[s].Epoch {
			t.Fatalf("suspect c lost shard %d: %+v → %+v", s, before.Shards[s], a)
		}
	}
	c.members.setStatus("c", raftstore.MemberAlive)

	leader := ""
	for id, n := range c.nodes {
		if n.store.State().String() == "Leader" {
			leader = id
		}
	}
	victim := "c"
	if leader == "c" {
		victim = "b"
	}
	survivors := []string{"a", "b", "c"}
	for i, id := range survivors {
		if id == victim {
			survivors = append(survivors[:i:i], survivors[i+1:]...)
			break
		}
	}
	ref := c.nodes[survivors[0]].own.Holder().Load()
	c.stop(victim, raftstore.MemberFailed)
	testwait.For(t, 10*time.Second, "victim's shards re-owned", func() bool { return c.converged(survivors...) })
	after := c.nodes[survivors[0]].own.Holder().Load()
	for i, a := range after.Shards {
		was := ref.Shards[i]
		if was.Owner != victim && (a.Owner != was.Owner || a.Epoch != was.Epoch) {
			t.Fatalf("shard %d moved from live %s to %s (minimal movement broken)", i, was.Owner, a.Owner)
		}
		if was.Owner == victim && a.Epoch <= was.Epoch {
			t.Fatalf("shard %d changed owner without a new epoch: %+v → %+v", i, was, a)
		}
	}

	c.start(victim, 3, 32)
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(c.dump())
		}
	})
	testwait.For(t, 20*time.Second, "restarted member owns shards again", func() bool {
		return c.converged("a", "b", "c") && len(c.nodes[victim].own.Owned()) > 0
	})
}

// A node whose --shards differs from the cluster's is not ready, says why,
// and excludes itself from placement; restarted with the right flag it
// clears that and takes shards.
func TestShardCountMismatch(t *testing.T) {
	c := newCluster(t)
	a := c.start("a", 1, 8)
	testwait.For(t, 10*time.Second, "a ready", func() bool { ok, _ := a.own.Ready(); return ok })
	b := c.start("b", 99, 16)
	var reason string
	testwait.For(t, 20*time.Second, "b reports the mismatch", func() bool {
		var ok bool
		ok, reason = b.own.Ready()
		return !ok && strings.Contains(reason, "created with 8 shards")
	})
	if !strings.Contains(reason, "--shards 16 cannot change it") {
		t.Fatalf("reason = %q", reason)
	}
	testwait.For(t, 10*time.Second, "b excluded as misconfigured", func() bool {
		d := a.store.Reader().DrainingNodes()
		return len(d) == 1 && d[0].Node == "b" && d[0].Reason == state.DrainMisconfigured
	})
	// The leader re-places shards after the flag commits: wait for that map.
	testwait.For(t, 10*time.Second, "no shard placed on the misconfigured node", func() bool {
		return len(a.store.Reader().ShardMap().OwnedBy("b")) == 0
	})
	if len(b.own.Owned()) != 0 {
		t.Fatal("misconfigured node works on shards")
	}

	c.stop("b", raftstore.MemberLeft)
	b = c.start("b", 99, 8)
	testwait.For(t, 20*time.Second, "b ready and owning shards", func() bool {
		ok, _ := b.own.Ready()
		return ok && len(b.own.Owned()) > 0 && c.converged("a", "b")
	})
	if d := a.store.Reader().DrainingNodes(); len(d) != 0 {
		t.Fatalf("draining after restart with the right flag: %+v", d)
	}
}

// Admin: move pins a shard to a node (a pin survives a leader change), an
// unknown node is refused naming it, a stale close is refused with the
// current owner and epoch, a close re-assigns with a new epoch, and an
// operator drain empties a node until undrained.
func TestAdminOperations(t *testing.T) {
	c := newCluster(t)
	for _, id := range []string{"a", "b", "c"} {
		c.start(id, 3, 16)
	}
	testwait.For(t, 20*time.Second, "converged", func() bool { return c.converged("a", "b", "c") })
	var leader, target string
	for id, n := range c.nodes {
		if n.store.State().String() == "Leader" {
			leader = id
		}
	}
	for _, id := range []string{"a", "b", "c"} {
		if id != leader {
			target = id
		}
	}
	admin := c.nodes[target].own // a follower: writes are forwarded
	m := admin.ShardMap()
	shard := -1
	for i, a := range m.Shards {
		if a.Owner != target {
			shard = i
			break
		}
	}
	if shard < 0 {
		t.Fatal("target owns every shard")
	}

	_, err := admin.Move(ctxT(t), shard, "nope", "test")
	var rerr *state.Error
	if !errors.As(err, &rerr) || rerr.Code != state.CodeInvalidArgument || rerr.Field != "node" || !strings.Contains(rerr.Message, `"nope"`) {
		t.Fatalf("move to unknown node: %v", err)
	}
	if _, err := admin.Move(ctxT(t), 99, target, "test"); !errors.Is(err, shardmap.ErrNoSuchShard) {
		t.Fatalf("move of shard 99: %v", err)
	}
	a, err := admin.Move(ctxT(t), shard, target, "test")
	if err != nil || a.Owner != target || a.Pinned != target || a.Epoch <= m.Shards[shard].Epoch {
		t.Fatalf("move: %+v, %v", a, err)
	}

	// Close at a stale epoch is refused with the current assignment.
	stale := a.Epoch - 1
	_, err = admin.CloseShard(ctxT(t), shard, &stale, "test")
	var wo *shardmap.WrongOwnerError
	if !errors.As(err, &wo) || wo.Owner != target || wo.Epoch != a.Epoch || wo.Shard != shard {
		t.Fatalf("stale close: %v", err)
	}
	b, err := admin.CloseShard(ctxT(t), shard, &a.Epoch, "test")
	if err != nil || b.Owner != target || b.Epoch != a.Epoch+2 {
		t.Fatalf("close: %+v, %v (before %+v)", b, err, a)
	}

	// The pin survives a leader change.
	c.stop(leader, raftstore.MemberFailed)
	var rest []string
	for id := range c.nodes {
		rest = append(rest, id)
	}
	testwait.For(t, 20*time.Second, "re-converged without the old leader", func() bool { return c.converged(rest...) })
	if got := admin.ShardMap().Shards[shard]; got.Owner != target || got.Pinned != target {
		t.Fatalf("after leader change: %+v", got)
	}

	// Operator drain empties the target, pinned shard included; undrain
	// brings it back.
	if _, err := admin.SetDraining(ctxT(t), target, true, "test"); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 10*time.Second, "target drained", func() bool { return len(admin.Owned()) == 0 })
	if got := admin.ShardMap().Shards[shard]; got.Pinned != target || got.Owner == target {
		t.Fatalf("drained pinned shard: %+v", got)
	}
	if _, err := admin.SetDraining(ctxT(t), "ghost", true, "test"); !errors.As(err, &rerr) || rerr.Field != "node" {
		t.Fatalf("drain of unknown node: %v", err)
	}
	if _, err := admin.SetDraining(ctxT(t), target, false, "test"); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 10*time.Second, "target back with its pinned shard", func() bool {
		return admin.Owned()[shard] != 0 && len(admin.DrainingNodes()) == 0
	})
}

// Drain before shutdown empties the node and keeps it out of placement; the
// node clears its own shutdown flag when it starts again.
func TestDrainBeforeShutdownAndRestart(t *testing.T) {
	c := newCluster(t)
	c.start("a", 2, 16)
	c.start("b", 2, 16)
	testwait.For(t, 20*time.Second, "converged", func() bool { return c.converged("a", "b") && len(c.nodes["b"].own.Owned()) > 0 })
	b := c.nodes["b"]
	if err := b.own.Drain(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	if n := len(b.own.Owned()); n != 0 {
		t.Fatalf("b owns %d shards after Drain", n)
	}
	d := b.store.Reader().DrainingNodes()
	if len(d) != 1 || d[0].Node != "b" || d[0].Reason != state.DrainShutdown {
		t.Fatalf("draining = %+v", d)
	}
	c.stop("b", raftstore.MemberLeft)
	c.start("b", 2, 16)
	testwait.For(t, 20*time.Second, "b back in placement", func() bool {
		return len(c.nodes["a"].store.Reader().DrainingNodes()) == 0 && c.converged("a", "b") && len(c.nodes["b"].own.Owned()) > 0
	})
}
