package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"fusebox/api"
	"fusebox/breakerpool"
	"fusebox/internal/testwait"
	"fusebox/transport/transporttest"
)

// TestChaosRetryAfterNodeDies (issue 19 §1 chaos invariant, bounded): the
// destination answers 429 `Retry-After: 6` while tasks flow through 3
// nodes, and one node is SIGKILLed the moment the 429s begin (racing its
// own and its peers' hints), then restarted at once. Invariant: the calls
// reaching the destination before the deadline are at most one per node
// (the restarted node learns the deadline by push/pull, not by calling);
// every survivor and the restarted node hold the same deadline; after it,
// every task succeeds.
func TestChaosRetryAfterNodeDies(t *testing.T) {
	c := newTaskCluster(t, 3)
	dest := NewDest(t)
	putEndpoint(t, c, "ep-ra-chaos", dest.NexusURL())
	setConfig(t, c, keyBreaker, "ep-ra-chaos", `{"Timeout":"30s"}`)
	const ns = "ns-ra-chaos"
	key := breakerpool.Key{TaskGroup: breakerpool.TaskGroupNexusInvocation, NamespaceID: ns, Destination: "ep-ra-chaos"}
	l := NewTaskLoad(c, "ra-chaos", func(i int) (api.TaskSubmit, *Dest) {
		return nexusTask(ns, fmt.Sprintf("wf-%d", i), "ep-ra-chaos", i), dest
	})
	l.Run(0, 2, 40*time.Millisecond)
	testwait.ForErr(t, convergeTimout, "a breaker for ep-ra-chaos on every node", func() error {
		bs, _, err := clusterBreakers(c.Procs[0], key)
		if err != nil {
			return err
		}
		if len(bs) != len(c.Procs) {
			return fmt.Errorf("breakers for %s: %s", key, breakerLine(bs))
		}
		return nil
	})

	dest.inner.SetRetryAfter("6")
	downAt := time.Now()
	dest.SetMode(t, transporttest.ModeTooManyRequests)
	victim := c.Procs[2]
	if err := victim.Kill(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), convergeTimout)
	defer cancel()
	if err := victim.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	var deadline time.Time
	testwait.ForErr(t, 10*time.Second, "every node, the restarted one too, to hold the Retry-After deadline", func() error {
		bs, _, err := clusterBreakers(c.Procs[0], key)
		if err != nil {
			return err
		}
		held := 0
		for _, b := range bs {
			if b.State == "open" && b.RetryAfterUntil != nil {
				held++
				if b.RetryAfterUntil.After(deadline) {
					deadline = *b.RetryAfterUntil
				}
			}
		}
		if held != len(c.Procs) {
			return fmt.Errorf("%d of %d hold it: %s", held, len(c.Procs), breakerLine(bs))
		}
		return nil
	})
	t.Logf("%s killed and restarted; every node held off until %v (%v after the 429s began)",
		victim.Name(), deadline.Format(time.RFC3339Nano), deadline.Sub(downAt).Round(time.Millisecond))
	testwait.ForErr(t, 20*time.Second, "the Retry-After deadline to pass", func() error {
		if time.Now().Before(deadline) {
			return fmt.Errorf("%v left", time.Until(deadline))
		}
		return nil
	})
	calls := dest.CallsBetween(downAt, deadline.Add(-time.Millisecond))
	dest.SetMode(t, transporttest.ModeUp)
	t.Logf("%d calls reached the destination between its first 429 and its deadline", calls)
	if calls > len(c.Procs) {
		t.Errorf("%d calls before the Retry-After deadline, want at most one per node (%d)", calls, len(c.Procs))
	}
	rep := l.Check(t, convergeTimout)
	t.Logf("recovery: %v", rep)
}
