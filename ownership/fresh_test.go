package ownership

import (
	"testing"
	"time"

	"fusebox/internal/testwait"
)

// A process stopped (SIGSTOP, a long stall) for longer than FreshLag finds
// its freshness check overdue when it resumes: Fresh refuses calls at once,
// and the node works again as soon as a read barrier has run through the
// leader — not at its next tick, which here is a minute away (FreshCheck and
// the backstop both a minute).
func TestResumedFollowerResyncsWithoutWaitingForATick(t *testing.T) {
	c := newCluster(t)
	c.freshCheck, c.backstop = time.Minute, time.Minute
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
	leader, _ := c.nodes["a"].store.Leader()
	var f *node
	for id, n := range c.nodes {
		if id != leader {
			f = n
			break
		}
	}

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
