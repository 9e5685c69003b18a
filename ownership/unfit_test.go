package ownership

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"fusebox/internal/testwait"
)

// Members Config.Unfit names get no shard while it names them (a node that
// cannot reach the task store), and get shards again after; a set naming
// every member is ignored rather than leaving the shards unowned.
func TestUnfitMembersGetNoShards(t *testing.T) {
	c := newCluster(t)
	var unfit atomic.Pointer[map[string]string]
	c.unfit = func(context.Context) map[string]string {
		if p := unfit.Load(); p != nil {
			return *p
		}
		return nil
	}
	for _, id := range []string{"a", "b", "c"} {
		c.start(id, 3, 24)
	}
	testwait.For(t, 20*time.Second, "converged on a, b, c", func() bool { return c.converged("a", "b", "c") })

	unfit.Store(&map[string]string{"c": "its task store is unreachable"})
	testwait.For(t, 20*time.Second, "c's shards on a and b", func() bool {
		return c.converged("a", "b") && len(c.nodes["c"].own.Owned()) == 0
	})

	unfit.Store(&map[string]string{"a": "x", "b": "x", "c": "x"})
	testwait.For(t, 20*time.Second, "every member owning shards again: a set naming them all is ignored", func() bool {
		return c.converged("a", "b", "c") && len(c.nodes["c"].own.Owned()) > 0
	})

	unfit.Store(&map[string]string{"a": "x"})
	testwait.For(t, 20*time.Second, "a's shards on b and c", func() bool {
		return c.converged("b", "c") && len(c.nodes["a"].own.Owned()) == 0
	})
	unfit.Store(nil)
	testwait.For(t, 20*time.Second, "a owning shards again", func() bool {
		return c.converged("a", "b", "c") && len(c.nodes["a"].own.Owned()) > 0
	})
}
