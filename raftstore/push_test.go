package raftstore

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"fusebox/raftstore/state"
)

// TestPushCommitsReachFollowersBeforeCommitTimeout: with a CommitTimeout far
// longer than the test's deadlines, followers still apply each write (and a
// follower's Sync returns) at once, because the leader pushes the commit
// index with a barrier. Without the push a follower would learn of each
// write only after 30–60 s (checked: with pushCommit a no-op this test fails
// at its first wait).
func TestPushCommitsReachFollowersBeforeCommitTimeout(t *testing.T) {
	c := threeVoters(t, func(cfg *Config) {
		cfg.CommitTimeout = 30 * time.Second
		cfg.PushCommits = true
	})
	leader := c.leader(15 * time.Second)
	ctx := context.Background()
	f := c.follower()
	// Writes one at a time, from the leader and forwarded from a follower,
	// each the last write when it commits: every one must reach every node.
	for i := range 4 {
		s := leader
		if i%2 == 1 {
			s = f
		}
		e, err := s.SetConfig(ctx, state.SetConfigCommand{Key: "breaker.enabled", Namespace: fmt.Sprintf("ns%d", i), Value: json.RawMessage(`{"on":true}`)})
		if err != nil {
			t.Fatal(err)
		}
		c.waitAllApplied(e.Index, 5*time.Second)
	}
	sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := f.Sync(sctx); err != nil {
		t.Fatalf("a follower's Sync: %v", err)
	}
}
