package pgstore

import (
	"sync"
	"time"

	"fusebox/queue"
)

// Reported lows (queue.DueLowStore, queue.DueLowTracker): for each shard,
// the earliest due time of the tasks written into its due order since its
// reader last asked, so that the reader starts each read at its cursor (or
// at that low) instead of 250 ms before it, and reads the whole shard only
// as a backstop every queue.Config.FullReadBackstop instead of every 100 ms.
// Each of those reads walked the shard's tasks in flight (they stay
// pending here until their result is written): about 15 rows walked per
// delivered task (DESIGN.md, "Reported lows").
//
// Other nodes insert rows directly, so this store knows their lows only
// from their notifications: a submit's names each shard it wrote with the
// earliest due time it wrote there (notifyPayload). It tracks lows only
// while it listens; while it does not (connection down, a database without
// LISTEN/NOTIFY), DueLowsTracked is false and readers read as before. When
// it starts listening, every shard's next low is a full read: what was
// committed while it did not listen is found by it. A notification that
// names a shard without a time, or every shard (an empty payload: a
// redrive, an import, a list too long), or that cannot be read, makes the
// next read of those shards full as well. What a lost notification (a
// sender that failed between its commit and its notification) would have
// reported is found by the backstop.

// dueLows is the lows not yet taken, per shard.
type dueLows struct {
	mu  sync.Mutex
	low map[int]time.Time // shard → earliest due time written since its last take; zero: read it all
	// gen is raised when any shard's writes may have gone unreported; a
	// shard whose last take saw an older gen is read whole next.
	gen   uint64
	taken map[int]uint64
}

func newDueLows() *dueLows {
	return &dueLows{low: make(map[int]time.Time), taken: make(map[int]uint64), gen: 1}
}

// lower records that tasks due at at were written into shard's due order
// (at zero: tasks due at unknown times, the next read is full).
func (d *dueLows) lower(shard int, at time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if cur, ok := d.low[shard]; !ok || at.Before(cur) {
		d.low[shard] = at
	}
}

// lowerAll makes every shard's next read full.
func (d *dueLows) lowerAll() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.gen++
	clear(d.low)
}

// take returns and forgets shard's low: the zero time (ok) for a full read.
func (d *dueLows) take(shard int) (time.Time, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.taken[shard] != d.gen {
		d.taken[shard] = d.gen
		delete(d.low, shard)
		return time.Time{}, true
	}
	at, ok := d.low[shard]
	delete(d.low, shard)
	return at, ok
}

var (
	_ queue.DueLowStore   = (*Store)(nil)
	_ queue.DueLowTracker = (*Store)(nil)
)

// TakeDueLow implements queue.DueLowStore.
func (s *Store) TakeDueLow(shard int) (time.Time, bool) { return s.lows.take(shard) }

// DueLowsTracked implements queue.DueLowTracker: lows are complete only
// while this store hears every other node's writes.
func (s *Store) DueLowsTracked() bool { return s.listening.Load() }

// wroteLows records this node's own writes' lows and wakes their shards'
// readers here (recordLows), then has the notifier tell the other nodes.
// A nil lows is a write to shards and times not known (every shard is read
// whole).
func (s *Store) wroteLows(lows map[int]time.Time) {
	s.recordLows(lows)
	s.wakeOthers(lows)
}

// recordLows records lows (this node's writes', or another node's from its
// notification), then wakes their shards' readers: the low is recorded
// before the wake, as queue.DueLowStore asks. nil: every shard, read
// whole.
func (s *Store) recordLows(lows map[int]time.Time) {
	if lows == nil {
		s.lows.lowerAll()
		s.notify()
		return
	}
	for sh, at := range lows {
		s.lows.lower(sh, at)
	}
	s.wakeShards(lows)
}
