package pgstore

import (
	"sync"
	"time"

	"fusebox/queue"
)

// backlogTTL is how long ForQueue's Backlog reuses a shard's count.
const backlogTTL = time.Second

// ForQueue returns the store as the node's queue reads it: the same store
// (the same reads, writes and fencing), except that Backlog reuses a
// shard's count for up to backlogTTL. The queue reads Backlog only for its
// per-shard depth gauge, on every wake-up of every reader; the count is
// O(pending tasks of the shard) here, not O(1) as in memory, and run per
// read it took a fifth of the database's time in the 3-node delivery
// benchmark. The gauge lags by at most a second; the API's backlog reads
// (shard stats, the status page) use the store itself, exact.
func (s *Store) ForQueue() queue.Store {
	return &queueView{Store: s, counts: make(map[int]backlogCount), now: time.Now}
}

type queueView struct {
	*Store
	mu     sync.Mutex
	counts map[int]backlogCount
	now    func() time.Time // tests move it
}

type backlogCount struct {
	n  int
	at time.Time
}

// Backlog is Store.Backlog, reused for backlogTTL per shard. A failed count
// (-1) is not kept.
func (v *queueView) Backlog(shard int) int {
	now := v.now()
	v.mu.Lock()
	c, ok := v.counts[shard]
	v.mu.Unlock()
	if ok && now.Sub(c.at) < backlogTTL {
		return c.n
	}
	n := v.Store.Backlog(shard)
	if n >= 0 {
		v.mu.Lock()
		v.counts[shard] = backlogCount{n: n, at: now}
		v.mu.Unlock()
	}
	return n
}

var _ queue.BlockedStore = (*queueView)(nil)
