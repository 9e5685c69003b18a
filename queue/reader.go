package queue

import (
	"slices"
	"time"
)

// A shard's reader: its loop, its reads of the store (the due read, the
// release walks and recalls it drives) and its wake-up time.

// readLoop loads due tasks and hands them to the scheduler, then sleeps
// until the next due time, a store change, an in-flight task leaving or a
// limit change — never polling.
func (s *shard) readLoop() {
	defer close(s.readerDone)
	var sub <-chan struct{}
	var unsubscribe func()
	if ss, ok := s.q.store.(ShardSubscriber); ok {
		sub, unsubscribe = ss.SubscribeShard(s.id)
	} else {
		sub, unsubscribe = s.q.store.Subscribe()
	}
	defer unsubscribe()
	paused := false
	defer func() {
		if paused {
			s.q.paused.Add(-1)
		}
	}()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		select {
		case <-s.stopRead:
			return
		default:
		}
		s.wakeups.Add(1)
		bs := s.q.limits.Current().BatchSize()
		if (bs <= 0) != paused {
			paused = bs <= 0
			if paused {
				s.q.paused.Add(1)
			} else {
				s.q.paused.Add(-1)
			}
		}
		var wakeAt time.Time
		if !paused {
			more, now := s.readBatch(bs)
			if more {
				continue
			}
			wakeAt = s.nextWake(now)
		}
		timer.Stop()
		var tc <-chan time.Time
		if !wakeAt.IsZero() {
			timer.Reset(time.Until(wakeAt))
			tc = timer.C
		}
		select {
		case <-s.stopRead:
			return
		case <-sub:
		case <-s.wake:
		case <-tc:
		}
	}
}

// readBatch offers the held tasks again if a group has room (or their
// wait is over), then loads and dispatches up to bs due tasks. more is true
// when the batch was full and the scheduler took all of it, so more may be
// due at once.
func (s *shard) readBatch(bs int) (more bool, now time.Time) {
	q := s.q
	now = time.Now()
	s.mu.Lock()
	for id, at := range s.parked {
		if !at.After(now) {
			delete(s.parked, id)
			s.rescan.Store(true)
		}
	}
	s.nextKnown = false
	if !q.current(s) {
		// Out of contact with the cluster (attempt.go's stale_ownership):
		// every task read now would be released unsent and parked, and each
		// park's expiry would force a full read of the shard, walking its
		// tasks in flight again. Under CPU starvation on a loaded cluster,
		// when contact lapses most, that was several releases and ~200 tasks
		// walked per delivered task. Read nothing and look again after
		// RejectRetry (a released task's park) or at the next wake-up.
		// Tasks held for a full buffer wait too: their retry time may have
		// passed, and nextWake would then wake this reader at once, again
		// and again — a busy loop on every shard with held tasks that
		// starved Raft and gossip on a loaded node, so it never caught up
		// (a postgres delivery benchmark stalled for minutes).
		s.nextDue, s.nextKnown = now.Add(q.cfg.RejectRetry), true
		if s.held.len() > 0 && s.heldUntil.Before(s.nextDue) {
			s.heldUntil = s.nextDue
		}
		s.cursorRead = false
		s.mu.Unlock()
		return false, now
	}
	if until, held := s.ho.holding(now); held {
		// Handed over for a move (handover.go): read and dispatch nothing
		// until the hold ends, when work resumes if the move never came.
		s.nextDue, s.nextKnown = until, true
		if s.held.len() > 0 && s.heldUntil.Before(until) {
			s.heldUntil = until
		}
		s.cursorRead = false
		s.mu.Unlock()
		return false, now
	}
	var retry heldTasks
	if s.held.len() > 0 && (s.room.Swap(false) || !now.Before(s.heldUntil)) {
		retry, s.held = s.held, heldTasks{}
	}
	limit := min(bs, q.cfg.MaxPendingPerShard-len(s.inflight)-len(s.parked))
	if limit <= 0 {
		// At capacity: no due time can wake this reader usefully. What
		// frees capacity (a written result, a release) signals it, and
		// nextWake still covers the held and parked timers. Nor can the
		// full-read backstop: its time would pass while nothing can be
		// read, and its timer would fire on every wake-up from then on
		// (the reader spun). The next read after room frees is full if the
		// backstop is due by then.
		s.nextDue, s.nextKnown = time.Time{}, true
		s.cursorRead = false
		s.mu.Unlock()
		s.dispatch(retry, nil, now)
		s.deferSaturated(now)
		return false, now
	}
	s.reads.Add(1)
	from := s.readFrom(now)
	s.cursorRead = !from.IsZero()
	var (
		tasks []Task
		next  time.Time
		known bool
	)
	if cs, ok := q.store.(ContextDueStore); ok {
		// A database read, without s.mu (ContextDueStore): under it, a read
		// the database did not answer held up for its whole timeout every
		// call of the shard about to start (markStarted), every result
		// (finish) and the shard's loss, and with it every other shard's
		// move (Queue.reconcile) — and a call admitted before the read then
		// went out after its shard had moved
		// (TestPostgresUnreachableFromOneNode, the late call).
		s.readOut = true
		skip := s.skipSnapshot()
		s.mu.Unlock()
		tasks, next, known = cs.DueContext(s.rctx, s.id, from, now, limit, skip)
		s.mu.Lock()
		written := s.writtenInRead
		s.readOut, s.writtenInRead = false, nil
		if s.lost || s.rctx.Err() != nil {
			s.mu.Unlock()
			return false, now
		}
		if len(written) > 0 {
			tasks = slices.DeleteFunc(tasks, func(t Task) bool { _, w := written[t.ID]; return w })
		}
	} else {
		tasks, next, known = q.store.Due(s.id, from, now, limit, s.skip)
	}
	s.nextDue, s.nextKnown = next, known
	if !known && (from.IsZero() || from.Before(s.cursor)) {
		// Stopped at the limit before the cursor: what it did not reach
		// may all be behind the cursor, where a read from it would not
		// look. The next read starts where this one stopped: the tasks
		// come in due order, and every task due before the last of them
		// was taken or passed over as in flight. (Starting again at from
		// walked this read's tasks, in flight by then, once more: with a
		// store that reports lows, about two rows per delivered task.)
		again := from
		if n := len(tasks); n > 0 && tasks[n-1].NextAttemptAt.After(again) {
			again = tasks[n-1].NextAttemptAt
		}
		s.readAgainFrom(again)
	}
	items := make([]*item, len(tasks))
	for i := range tasks {
		items[i] = newItem(tasks[i], s, nil)
		s.track(items[i])
		s.forgetDeferred(tasks[i].ID)
		s.noteInterrupted(&tasks[i])
		if at := tasks[i].NextAttemptAt; at.After(s.cursor) {
			s.cursor = at
		}
	}
	// Blocked tasks of keys whose breaker closed, before their time (not
	// moving the cursor: they are due later than it).
	released, releaseMore := s.readReleases(limit-len(tasks), s.skip)
	// Deferred tasks of keys that ran dry, before their turn (recall.go).
	s.recallBackstop(now)
	recalled := s.readRecalls(now, limit-len(tasks)-len(released), s.skip)
	written := s.written
	s.mu.Unlock()
	refused := s.dispatch(retry, append(append(items, released...), recalled...), now)
	if refused {
		s.deferSaturated(now)
	}
	if len(tasks) > 0 || written != s.depthWritten || !s.depthSet {
		s.depthWritten, s.depthSet = written, true
		s.depth.Set(float64(q.store.Backlog(s.id)))
	}
	more = len(tasks)+len(released)+len(recalled) == limit && !refused
	return more || releaseMore, now
}

// skip reports whether a read passes over task id: in flight here, or
// parked. Called with s.mu held.
func (s *shard) skip(id string) bool {
	_, busy := s.inflight[id]
	_, parked := s.parked[id]
	return busy || parked
}

// skipSnapshot is skip for a read made without s.mu (ContextDueStore): the
// tasks in flight or parked now, copied into a set the shard reuses (the
// reader's alone). A task that leaves them during the read is still passed
// over: its result may be written under the read (writtenInRead), or it was
// released, and the next read takes it. (Taking s.mu for each task the
// read asks about measured the same, but puts the walk, which passes over
// the whole window, in line for the mutex every call and result of the
// shard takes.) Called with s.mu held.
func (s *shard) skipSnapshot() func(string) bool {
	if s.skipSet == nil {
		s.skipSet = make(map[string]struct{}, len(s.inflight)+len(s.parked))
	}
	set := s.skipSet
	clear(set)
	for id := range s.inflight {
		set[id] = struct{}{}
	}
	for id := range s.parked {
		set[id] = struct{}{}
	}
	return func(id string) bool {
		_, ok := set[id]
		return ok
	}
}

// nextWake is the earliest of the next due task (known from the last read,
// or looked up), the backstop full read, the next parked expiry, the held
// tasks' retry and the recall backstop; zero when there is none.
func (s *shard) nextWake(now time.Time) time.Time {
	next := s.nextDue
	if !s.nextKnown {
		var ok bool
		if next, ok = s.q.store.NextDue(s.id, now); !ok {
			next = time.Time{}
		}
	}
	if s.cursorRead { // the backstop full read
		if full := s.lastFull.Add(s.fullEvery()); next.IsZero() || full.Before(next) {
			next = full
		}
	}
	s.mu.Lock()
	for _, at := range s.parked {
		if next.IsZero() || at.Before(next) {
			next = at
		}
	}
	if s.held.len() > 0 && (next.IsZero() || s.heldUntil.Before(next)) {
		next = s.heldUntil
	}
	if at, ok := s.nextRecallCheck(now); ok && (next.IsZero() || at.Before(next)) {
		next = at
	}
	s.mu.Unlock()
	return next
}
