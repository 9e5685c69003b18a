package queue

import (
	"sync/atomic"
	"time"

	"github.com/sony/gobreaker/v2"

	"fusebox/breakerpool"
)

// Recovery drains the backlog at once (DESIGN.md, "Release on close").
//
// A task an open breaker refused is rescheduled for the breaker's probe or
// later (blockedDelay, up to 5 min), and each further refusal lengthens its
// gentle backoff. When the key's breaker closes — its own probe, a peer's
// hint, an operator's force — those tasks become due at once on their
// owner: each shard reader walks its blocked tasks of the key in due order
// (BlockedStore) and dispatches them like due tasks, so the group's buffer,
// concurrency and rate limits pace them, not their own delays. Nothing is
// written: a released task's next result replaces its row as usual.
//
// The walk starts at the close, not at the shard's first task: a task due
// by then is the due reads' (readBatch reads every due task, blocked or
// not), and a shard's backlog is mostly due tasks, which the walk used to
// pass over one by one under the shard's mutex — a whole shard per close,
// for every key that closed (DESIGN.md, "Release on close").

// Cursor is a position in a shard's due order: after the task (At, ID).
type Cursor struct {
	At time.Time
	ID string
}

// BlockedStore is a Store that can list a shard's blocked tasks of one
// key. A Store without it keeps the tasks waiting for their own time.
type BlockedStore interface {
	// Blocked returns up to limit pending tasks of shard that a breaker
	// refused (Blocked > 0) and whose KeyOf is k, in due order after
	// `after` (zero: from the start). skip works as in Due. last is where
	// the next page starts: the last task returned, or, when the store
	// bounds the rows one call examines and the bound came first (fewer
	// than limit tasks, done false), the last row it examined. done is true
	// when the walk reached the shard's end.
	Blocked(shard int, k breakerpool.Key, after Cursor, limit int, skip func(id string) bool) (tasks []Task, last Cursor, done bool)
}

// before reports whether c is before o in due order.
func (c Cursor) before(o Cursor) bool {
	if c.At.Equal(o.At) {
		return c.ID < o.ID
	}
	return c.At.Before(o.At)
}

// releaseReadsPerPass bounds the Blocked reads of one reader pass. Each
// read is bounded by the store's row budget (raftstore:
// state.MaxBlockedScan rows, about 75 µs), and the pass holds the shard's
// mutex: without this bound a burst of K closes held it for K reads. The
// walks left over continue in the next pass, at once.
const releaseReadsPerPass = 4

// LaterStore is a Store that can list a shard's pending tasks of one key
// due later than now (defer.go: deferred tasks recalled when their key
// drains sooner than their turns said). A Store without it leaves deferred
// tasks to their turns.
type LaterStore interface {
	// Later returns up to limit pending tasks of shard whose KeyOf is k, in
	// due order after `after` and due no later than until. skip works as in
	// Due. last is the position of the last task returned; done is true
	// when the walk passed until or reached the shard's end.
	Later(shard int, k breakerpool.Key, after Cursor, until time.Time, limit int, skip func(id string) bool) (tasks []Task, last Cursor, done bool)
}

// release is one shard's walk over the blocked tasks of a closed key.
type release struct {
	key breakerpool.Key
	// from is the close: the walk starts there, and starts there again.
	from   time.Time
	cursor Cursor
	// waitFor: results recorded by the shard before the close (a refusal
	// decided before it may still be unwritten, and land behind the
	// cursor). Once that many are written, the walk runs once more from
	// from, so none is missed: at once if it had reached the end
	// (parked), else when it does (again).
	waitFor       uint64
	parked, again bool
	released      int
	// budget, when set, bounds what the walks of every shard may release
	// together: a probe for a half-open breaker (KeyProbing).
	budget *atomic.Int64
	// delegated: the walk of KeyDelegated, whose breaker stays open (its
	// refusals go through a peer). It is not ended by the breaker's state:
	// a released task refused without a peer to go through ends it
	// (blocked: "refused again").
	delegated bool
}

// take reserves up to n of the budget (all n without one).
func (r *release) take(n int) int {
	if r.budget == nil {
		return n
	}
	for {
		have := r.budget.Load()
		got := min(int64(n), have)
		if got <= 0 {
			return 0
		}
		if r.budget.CompareAndSwap(have, have-got) {
			return int(got)
		}
	}
}

// giveBack returns an unused reservation.
func (r *release) giveBack(n int) {
	if r.budget != nil && n > 0 {
		r.budget.Add(int64(n))
	}
}

// KeyOpened tells the queue that k's breaker opened or went half-open on
// this node (any source): k's ramp is armed (ramp.go), so the close finds
// its limiter at the start rate with no burst saved. It does not block.
func (q *Queue) KeyOpened(k breakerpool.Key) {
	if !q.closing.Load() {
		q.sched.armRamp(k, time.Now())
	}
}

// KeyClosed tells the queue that k's breaker closed on this node (any
// source). k's rate ramps up from its start (ramp.go), and every owned
// shard releases its blocked tasks of k. It does not block: the breaker
// pool's observer calls it.
func (q *Queue) KeyClosed(k breakerpool.Key) {
	if !q.closing.Load() {
		q.sched.startRamp(k, time.Now()) // before the release: released tasks meet the ramp
	}
	q.releaseBlocked(k)
}

// KeyClosedWithoutRamp is KeyClosed for a breaker that opened only to
// check a destination nobody found failing: a confirmation round's pause,
// or its designated probe, ended refuted (hintpolicy, "Confirm"). Its
// blocked tasks are released as at any close, but its rate does not ramp:
// the destination had no outage to recover from, and a ramp there held a
// healthy destination's calls to the ramp's start rate for seconds on
// every node that paused (node/queue.go). A ramp the opening armed is
// dropped.
func (q *Queue) KeyClosedWithoutRamp(k breakerpool.Key) {
	if !q.closing.Load() {
		q.sched.dropRamp(k, time.Now())
	}
	q.releaseBlocked(k)
}

// KeyDelegated tells the queue that k's refused calls now go through a
// peer (Deps.Delegate): every owned shard releases its blocked tasks of
// k, which would otherwise wait for the breaker's own probe, and a ramp
// the opening armed is dropped: the destination has no outage to recover
// from (its calls pass from the peer), and calls through the peer would
// otherwise keep to the ramp's start rate. The node does not arm it again
// at its breaker's later openings while the delegation lasts
// (node/queue.go). It does not block.
func (q *Queue) KeyDelegated(k breakerpool.Key) {
	if !q.closing.Load() {
		q.sched.dropRamp(k, time.Now())
	}
	q.release(k, true)
}

// releaseBlocked makes every owned shard release its blocked tasks of k.
func (q *Queue) releaseBlocked(k breakerpool.Key) { q.release(k, false) }

func (q *Queue) release(k breakerpool.Key, delegated bool) {
	if _, ok := q.store.(BlockedStore); !ok || q.closing.Load() {
		return
	}
	now := time.Now()
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, s := range q.shards {
		s.startRelease(k, now, nil, delegated)
	}
	q.log.Debug("blocked tasks are due now", "key", k.String(), "shards", len(q.shards), "through_peer", delegated)
}

// KeyProbing tells the queue that k's breaker became half-open on demand (a
// peer's recovery hint or an operator warm-started its probe): up to
// probes blocked tasks of k (the breaker's MaxRequests) are dispatched now
// as its probes, instead of the breaker waiting for a task to come due.
// Their success closes the breaker, which releases the rest (KeyClosed).
func (q *Queue) KeyProbing(k breakerpool.Key, probes int) {
	if _, ok := q.store.(BlockedStore); !ok || q.closing.Load() || probes <= 0 {
		return
	}
	budget := new(atomic.Int64)
	budget.Store(int64(probes))
	now := time.Now()
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, s := range q.shards {
		s.startRelease(k, now, budget, false)
	}
}

// startRelease starts (or restarts) the walk for k from now, the close,
// bounded by budget when it is not nil.
func (s *shard) startRelease(k breakerpool.Key, now time.Time, budget *atomic.Int64, delegated bool) {
	s.mu.Lock()
	if s.lost {
		s.mu.Unlock()
		return
	}
	r := s.releases[k]
	if r == nil {
		r = &release{key: k}
		s.releases[k] = r
	}
	r.from, r.cursor, r.parked, r.again, r.budget, r.delegated = now, Cursor{At: now}, false, false, budget, delegated
	r.waitFor = 0
	if s.finished > s.written {
		r.waitFor = s.finished
	}
	s.mu.Unlock()
	signal(s.wake)
}

// readReleases dispatches up to limit blocked tasks of the released keys
// (with s.mu held, after the due read). A key whose breaker is no longer
// closed ends its walk: its tasks wait for their own time again. more is
// true when a walk has more to read now (its read stopped at the store's
// row budget, the pass at releaseReadsPerPass, or it starts its second
// pass) and this pass moved on: the reader then reads again at once. A
// pass that moved no walk on (the store failing) waits for the next
// wake-up instead of spinning.
func (s *shard) readReleases(limit int, skip func(string) bool) (items []*item, more bool) {
	bs, ok := s.q.store.(BlockedStore)
	if !ok || len(s.releases) == 0 {
		return nil, false
	}
	reads, moved, unfinished := 0, false, false
	for k, r := range s.releases {
		if limit <= 0 {
			break
		}
		want := gobreaker.StateClosed
		if r.budget != nil {
			want = gobreaker.StateHalfOpen
		}
		if !r.delegated && s.q.breakers.Breaker(k).State() != want {
			s.endReleaseLocked(r, "breaker state changed")
			continue
		}
		if r.parked {
			continue // waiting for the results decided before the close
		}
		if reads == releaseReadsPerPass {
			unfinished = true
			break
		}
		n := r.take(limit)
		if n == 0 {
			s.endReleaseLocked(r, "probes taken")
			continue
		}
		reads++
		tasks, last, done := s.blocked(bs, k, r.cursor, n, skip)
		r.giveBack(n - len(tasks))
		for i := range tasks {
			it := newItem(tasks[i], s, r)
			s.track(it)
			items = append(items, it)
		}
		if r.cursor.before(last) {
			r.cursor, moved = last, true
		}
		r.released += len(tasks)
		limit -= len(tasks)
		switch {
		case !done:
			unfinished = unfinished || len(tasks) < n // stopped at the row budget
		case r.waitFor > 0:
			r.parked = true
		case r.again:
			r.again, r.cursor = false, Cursor{At: r.from}
			unfinished, moved = true, true
		default:
			s.endReleaseLocked(r, "all released")
		}
	}
	return items, unfinished && moved
}

// resultsWrittenLocked is called by the flusher (s.mu held) after written
// has grown: a walk whose results decided before the close are now written
// runs once more from the start.
func (s *shard) resultsWrittenLocked() {
	for _, r := range s.releases {
		if r.waitFor == 0 || s.written < r.waitFor {
			continue
		}
		r.waitFor = 0
		if r.parked {
			r.parked, r.cursor = false, Cursor{At: r.from}
		} else {
			r.again = true
		}
	}
}

// endRelease ends r's walk if it is still the current one for its key: a
// task it released was refused by the breaker again.
func (s *shard) endRelease(r *release, why string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.endReleaseLocked(r, why)
}

func (s *shard) endReleaseLocked(r *release, why string) {
	if s.releases[r.key] != r {
		return
	}
	delete(s.releases, r.key)
	s.q.log.Debug("blocked-task release ended", "key", r.key.String(), "shard", s.id, "released", r.released, "why", why)
}

// returnReleased writes a task that a release walk dispatched early back
// due after park: forgotten, it stayed due at its blocked time, up to
// BlockedBackoffMax away, and the walk had passed it. So a task released
// unstarted after its breaker closed (its node out of contact for a moment,
// a hand-over, a rate race) waited minutes (queue/DESIGN.md, "Release on
// close").
// The result changes nothing else: no attempt, the task's counters and
// message as they were.
func (s *shard) returnReleased(it *item, park time.Duration) {
	s.q.m.results.WithLabelValues(outcomeReleased).Inc()
	t := &it.task
	s.finish(it, Result{
		TaskID: t.ID, Status: StatusPending, Attempts: t.Attempts, Blocked: t.Blocked, Unexpected: t.Unexpected,
		NextAttemptAt: time.Now().Add(park), Message: t.Message, HTTPStatus: t.HTTPStatus,
	})
}

// blocked is bs.Blocked for this shard, bounded by the shard's read
// context when the store takes one (ContextWalkStore).
func (s *shard) blocked(bs BlockedStore, k breakerpool.Key, after Cursor, limit int, skip func(string) bool) ([]Task, Cursor, bool) {
	if cs, ok := bs.(ContextWalkStore); ok {
		return cs.BlockedContext(s.rctx, s.id, k, after, limit, skip)
	}
	return bs.Blocked(s.id, k, after, limit, skip)
}
