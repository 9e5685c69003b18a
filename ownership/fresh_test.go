package ownership

import (
	"sync"
	"testing"
	"time"

	"fusebox/internal/testwait"
	"fusebox/raftstore"
)

// A process stopped (SIGSTOP, a long stall) for longer than FreshLag finds
// its freshness check overdue when it resumes: Fresh refuses calls at once,
// and the node works again as soon as a read barrier has run through the
// leader — not at its next tick, which here is a minute away (FreshCheck and
// the backstop both a minute).
func TestResumedFollowerResyncsWithoutWaitingForATick(t *testing.T) {
	c := newCluster(t)
	c.freshCheck, c.backstop = time.Minute, time.Minute
	startFreshABC(t, c)
	// Fresh now, so no catch-up of its own is under way: one that had lost
	// contact under load (after startFreshABC) and was catching up stored
	// the time of its barrier over the stale check below, and counted as
	// fresh with no barrier after it (the likely cause of one CI failure).
	_, f := freshFollower(t, c)
	// The follower "was stopped" a minute ago: its last check is that old.
	applied := f.store.Stats().AppliedIndex
	f.own.lastCheck.Store(time.Now().Add(-time.Minute).UnixNano())
	if f.own.Fresh() {
		t.Fatal("Fresh with the freshness check a minute overdue")
	}
	testwait.For(t, 20*time.Second, "the resumed follower fresh again", f.own.Fresh)
	if got := f.store.Stats().AppliedIndex; got <= applied {
		t.Fatalf("fresh again without a read barrier: applied index %d, was %d", got, applied)
	}
	if ok, reason := f.own.Ready(); !ok {
		t.Fatalf("not ready after catching up: %s", reason)
	}
}

// A follower that stops hearing from the leader stops calling once its last
// contact is older than the store's ContactLag (500 ms at the lan timing),
// while raft still names that leader: raft gives a silent leader up only
// after an election timeout, 1–2 s at that timing. Every call a follower
// cut off from the leader makes in between is one whose result cannot
// commit, and the next owner makes it again. Before the bound, Fresh held
// until raft gave the leader up.
func TestFollowerStopsCallingOnceTheLeaderFallsSilent(t *testing.T) {
	c := newCluster(t)
	c.preset = raftstore.PresetLAN
	startFreshABC(t, c)
	leaderID, f := freshFollower(t, c)

	// The leader falls silent, as a cut leaves it for the follower: raft
	// shuts down with no word to its peers.
	ld := c.nodes[leaderID]
	_ = ld.own.Close()
	_ = ld.store.Close()
	silentAt := time.Now()
	var raftNamesLeader bool
	testwait.For(t, 10*time.Second, "the follower not fresh", func() bool {
		if f.own.Fresh() {
			return false
		}
		id, _ := f.store.Leader()
		raftNamesLeader = id == leaderID && f.store.InContact(0)
		return true
	})
	after := time.Since(silentAt)
	if !raftNamesLeader {
		t.Fatalf("the follower stopped calling only once raft gave the silent leader up (%v after it fell silent; ContactLag %v)",
			after.Round(time.Millisecond), f.store.ContactLag())
	}
	t.Logf("the follower stopped calling %v after the leader fell silent (ContactLag %v), raft still naming it",
		after.Round(time.Millisecond), f.store.ContactLag())
	testwait.For(t, 20*time.Second, "the follower fresh again under the new leader", f.own.Fresh)
}

// Config.CaughtUp runs after the read barrier and before the node counts as
// fresh, at its first catch-up and after every gap: what node/ derives from
// the replicated state (the dynamic config) is current before the node's
// first call. A restarted node once made 20 calls with no rate limit in
// the few milliseconds its config watcher lagged (Config.CaughtUp).
func TestCaughtUpRunsBeforeTheNodeIsFresh(t *testing.T) {
	c := newCluster(t)
	var mu sync.Mutex
	calls := map[string]int{}
	var whileFresh []string
	c.caughtUp = func(id string, m *Manager) {
		mu.Lock()
		defer mu.Unlock()
		calls[id]++
		if m == nil || m.fresh.Load() {
			whileFresh = append(whileFresh, id)
		}
	}
	startFreshABC(t, c)
	mu.Lock()
	for _, id := range []string{"a", "b", "c"} {
		if calls[id] == 0 {
			t.Errorf("%s is fresh and CaughtUp never ran", id)
		}
	}
	before := calls["b"]
	mu.Unlock()

	// A gap (a stopped process): fresh again only after CaughtUp ran again.
	c.nodes["b"].own.lastCheck.Store(time.Now().Add(-time.Minute).UnixNano())
	testwait.For(t, 20*time.Second, "b fresh again", c.nodes["b"].own.Fresh)
	mu.Lock()
	defer mu.Unlock()
	if calls["b"] <= before {
		t.Errorf("b fresh again after a gap without CaughtUp (%d calls, %d before)", calls["b"], before)
	}
	if len(whileFresh) > 0 {
		t.Errorf("CaughtUp ran on a node already fresh: %v", whileFresh)
	}
}

// startFreshABC starts nodes a, b and c (3 expected, 8 shards) and waits
// until every one is fresh on one committed map.
// freshFollower returns the leader's id and a follower, once that
// follower is fresh.
func freshFollower(t *testing.T, c *cluster) (string, *node) {
	t.Helper()
	leader, _ := c.nodes["a"].store.Leader()
	var f *node
	for id, n := range c.nodes {
		if id != leader {
			f = n
			break
		}
	}
	testwait.For(t, 20*time.Second, "the follower fresh", f.own.Fresh)
	return leader, f
}

func startFreshABC(t *testing.T, c *cluster) {
	t.Helper()
	for _, id := range []string{"a", "b", "c"} {
		c.start(id, 3, 8)
	}
	testwait.For(t, 20*time.Second, "every node fresh on one map", func() bool {
		for _, n := range c.nodes {
			if !n.own.Fresh() {
				return false
			}
		}
		return c.converged("a", "b", "c")
	})
}
