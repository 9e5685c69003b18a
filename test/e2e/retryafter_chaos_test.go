package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"fusebox/internal/testwait"
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
	sc := startRetryAfterScenario(t, "ra-chaos")
	c, key := sc.c, sc.key
	downAt := sc.tooManyRequests(t, "6")
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
	sc.finish(t, downAt, deadline, 0)
}
