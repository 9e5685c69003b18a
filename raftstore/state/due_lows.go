package state

import (
	"sync"
	"time"
)

// dueLows records, for each shard, the earliest due time of the pending
// rows that entered the shard's due order (a new pending row, or one whose
// NextAttemptAt moved) since the shard's reader last took it
// (State.TakeDueLow). It lets the queue's reader start each read at its
// cursor instead of a window before it: a row committed behind the cursor
// (a submit stamped earlier than ones already read, a node's clock behind)
// is reported here, so the reader reads from it then, where it used to walk
// every task in flight in a 250 ms window on each read and the shard's
// whole due order ten times a second (queue/DESIGN.md, "Read cursor").
//
// Local to this replica and derived from what it applied: never
// replicated, never in a snapshot. The FSM records a commit's lows after
// publishing the commit's table and before waking the readers, and a
// reader takes its shard's low before loading the table it reads, so a row
// is either in the table the reader reads or in the low of its next read.
type dueLows struct {
	mu  sync.Mutex
	low map[int]time.Time
}

// lower records that rows entered shard's due order, the earliest due at at.
func (d *dueLows) lower(shard int, at time.Time) {
	d.mu.Lock()
	if cur, ok := d.low[shard]; !ok || at.Before(cur) {
		if d.low == nil {
			d.low = make(map[int]time.Time)
		}
		d.low[shard] = at
	}
	d.mu.Unlock()
}

// take returns and clears shard's low; ok is false when no row entered
// the shard's due order since the last take.
func (d *dueLows) take(shard int) (at time.Time, ok bool) {
	d.mu.Lock()
	at, ok = d.low[shard]
	if ok {
		delete(d.low, shard)
	}
	d.mu.Unlock()
	return at, ok
}

// TakeDueLow returns the earliest NextAttemptAt among the pending rows of
// shard that entered its due order (were added, or had their due time
// moved) since the previous call for the shard, and forgets it; ok is
// false when none did. After a snapshot restore every shard with pending
// rows reports the zero time (read it all). One reader per shard: a second
// taker would take the first one's lows.
func (s *State) TakeDueLow(shard int) (time.Time, bool) {
	return s.lows.take(shard)
}
