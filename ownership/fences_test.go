package ownership

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"fusebox/internal/testwait"
	"fusebox/shardmap"
)

// fakeFences is a task store's fences: what each shard's owner acquired.
type fakeFences struct {
	mu sync.Mutex
	m  map[int]shardmap.Assignment
}

func (f *fakeFences) read(context.Context) (map[int]shardmap.Assignment, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return maps.Clone(f.m), nil
}

func (f *fakeFences) set(a shardmap.Assignment) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.m[a.Shard] = a
}

// acquire records every owned shard of sm as its owner acquiring it, as
// pgstore's FencedOwnership does: a fence only ever rises.
func (f *fakeFences) acquire(sm *shardmap.Map) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, a := range sm.Shards {
		if a.Owner != "" && a.Epoch > f.m[a.Shard].Epoch {
			f.m[a.Shard] = a
		}
	}
}

// A fence of the task store ahead of the committed map (another history's:
// a cluster rebuilt on an old database) makes the leader raise that shard's
// epoch past it, keeping its owner; fences that follow the map, as every
// acquire of one history does, never raise anything.
func TestLeaderRaisesEpochsPastStoreFences(t *testing.T) {
	c := newCluster(t)
	fences := &fakeFences{m: map[int]shardmap.Assignment{}}
	c.fences = fences.read
	for _, id := range []string{"a", "b", "c"} {
		c.start(id, 3, 16)
	}
	testwait.For(t, 20*time.Second, "converged on a, b, c", func() bool { return c.converged("a", "b", "c") })
	raised := func() float64 {
		var sum float64
		for _, n := range c.nodes {
			sum += testutil.ToFloat64(n.own.metrics.fenced)
		}
		return sum
	}

	// Fences that follow the map: several backstops (500 ms) with no raise.
	sm := c.nodes["a"].own.Holder().Load()
	fences.acquire(sm)
	deadline := time.Now().Add(2 * time.Second)
	testwait.For(t, 10*time.Second, "two seconds of placements", func() bool {
		fences.acquire(c.nodes["a"].own.Holder().Load())
		return time.Now().After(deadline)
	})
	if got := raised(); got != 0 {
		t.Fatalf("%v shards raised with fences that follow the map", got)
	}
	if now := c.nodes["a"].own.Holder().Load(); now.Version != sm.Version {
		t.Fatalf("map moved from version %d to %d with fences that follow it", sm.Version, now.Version)
	}

	// Another history's fences: one epoch far ahead, one at the map's
	// epoch for another owner.
	a3, a5 := sm.Shards[3], sm.Shards[5]
	fences.set(shardmap.Assignment{Shard: 3, Owner: "old-node", Epoch: a3.Epoch + 40})
	fences.set(shardmap.Assignment{Shard: 5, Owner: "old-node", Epoch: a5.Epoch})
	testwait.ForErr(t, 20*time.Second, "shards 3 and 5 raised past the fences", func() error {
		now := c.nodes["a"].own.Holder().Load()
		if g := now.Shards[3]; g.Owner != a3.Owner || g.Epoch != a3.Epoch+41 {
			return fmt.Errorf("shard 3 %+v, want %s@%d", g, a3.Owner, a3.Epoch+41)
		}
		if g := now.Shards[5]; g.Owner != a5.Owner || g.Epoch != a5.Epoch+1 {
			return fmt.Errorf("shard 5 %+v, want %s@%d", g, a5.Owner, a5.Epoch+1)
		}
		return nil
	})
	if got := raised(); got != 2 {
		t.Errorf("fusebox_shard_epochs_raised_total summed over the nodes = %v, want 2", got)
	}
	for id, n := range c.nodes {
		owned := n.own.Owned()
		for _, s := range []shardmap.Assignment{a3, a5} {
			if s.Owner == id {
				if _, ok := owned[s.Shard]; !ok {
					t.Errorf("%s does not own shard %d after the raise (owns %v)", id, s.Shard, owned)
				}
			}
		}
	}
}

// Fences of shards the cluster does not have (a database left by a cluster
// with more shards) are never ahead: nothing could raise them, and each
// placement would otherwise pay a read barrier for them.
func TestFenceAheadIgnoresShardsTheClusterLacks(t *testing.T) {
	sm := &shardmap.Map{Version: 3, NumShards: 2, Shards: []shardmap.Assignment{{Shard: 0, Owner: "a", Epoch: 2}, {Shard: 1, Owner: "b", Epoch: 2}}}
	fences := map[int]shardmap.Assignment{0: {Shard: 0, Owner: "a", Epoch: 2}, 5: {Shard: 5, Owner: "old", Epoch: 9}}
	if anyFenceAhead(sm, 2, fences) {
		t.Error("a fence of shard 5 counted ahead of a two-shard map")
	}
	if raised, _ := raiseToFences(sm, 4, fences); raised != nil {
		t.Errorf("raised %+v for a fence of a shard the map lacks", raised)
	}
	fences[1] = shardmap.Assignment{Shard: 1, Owner: "old", Epoch: 2}
	if !anyFenceAhead(sm, 2, fences) {
		t.Error("a fence at shard 1's epoch for another owner not counted ahead")
	}
	raised, why := raiseToFences(sm, 4, fences)
	if raised == nil || raised.Version != 4 || raised.Shards[1] != (shardmap.Assignment{Shard: 1, Owner: "b", Epoch: 3}) || raised.Shards[0] != sm.Shards[0] || len(why) != 1 {
		t.Errorf("raised %+v (%v), want shard 1 at b@3 in version 4, shard 0 unchanged", raised, why)
	}
	if sm.Shards[1].Epoch != 2 {
		t.Error("raiseToFences changed the map it was given")
	}
	if anyFenceAhead(nil, 2, map[int]shardmap.Assignment{1: {Shard: 1, Owner: "x", Epoch: 1}}) != true {
		t.Error("a fence with no map yet not counted ahead")
	}
}
