package queue

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"fusebox/breakerpool"
	"fusebox/raftstore/state"
	"fusebox/shardmap"
)

// shard is this node's work on one owned shard at one epoch: a reader
// goroutine that loads due tasks and dispatches them, and a flusher
// goroutine that writes their results in batches fenced by epoch.
type shard struct {
	id    int
	epoch uint64
	q     *Queue

	ctx    context.Context // calls; cancelled when the shard is lost or Close gives up draining
	cancel context.CancelFunc
	fctx   context.Context // result writes; cancelled when the shard is lost
	fstop  context.CancelFunc
	rctx   context.Context // database reads (ContextDueStore); ends with ctx, or when reading stops
	rstop  context.CancelFunc

	stopRead    chan struct{}
	stopFlush   chan struct{}
	readOnce    sync.Once
	flushOnce   sync.Once
	readerDone  chan struct{}
	flusherDone chan struct{}
	wake        chan struct{} // 1-slot: an in-flight task left, or a limit changed
	kick        chan struct{} // 1-slot: results are waiting

	mu       sync.Mutex
	inflight map[string]*item     // dispatched (or held), result not yet written
	parked   map[string]time.Time // released with a pause: not offered again before
	// held are tasks a full group buffer refused. They stay in inflight and
	// in memory, and are offered to the scheduler again when a group they
	// wait for signals room (room), or at heldUntil: not read and decoded
	// from the store again, which under load had cost 3–4 reads per
	// delivered task. Kept by key (heldTasks); written by the reader only,
	// under mu.
	held      heldTasks
	heldUntil time.Time
	// deferredTo is, per key, the latest turn a held task of it was
	// written back due at (defer.go); deferredIDs the tasks deferred and
	// not yet read again, and recallFrom, per key, where the recall of
	// them stopped (recall.go). Reader only.
	deferredTo  map[breakerpool.Key]time.Time
	deferredIDs map[string]struct{}
	recallFrom  map[breakerpool.Key]Cursor
	deferMark   uint64 // finished after the last deferral (recall.go)
	// dests is, per destination, its tasks in the window (share.go), and
	// shareTurns the latest turn a task of it was deferred to for its
	// share. Under mu.
	dests      map[string]*destLoad
	shareTurns map[string]time.Time
	results    []Result
	called     []bool // parallel to results: the result answers a call
	lost       bool
	// releases are the walks over closed keys' blocked tasks (release.go);
	// finished and written count results recorded and written, so a walk
	// can wait for the results decided before its close.
	releases          map[breakerpool.Key]*release
	finished, written uint64
	// seen holds the tasks this instance has loaded, until their result is
	// written (redelivery.go: interrupted attempts).
	seen  map[string]struct{}
	marks []startMark // calls begun and not yet marked or ended (redelivery.go)
	// readOut is set while the reader reads a ContextDueStore without
	// s.mu; writtenInRead holds the tasks whose results were written
	// meanwhile (forgetWritten): the read may have seen their rows from
	// before the write, so they are dropped from what it returns.
	readOut       bool
	writtenInRead map[string]struct{}
	skipSet       map[string]struct{} // skipSnapshot's set, reused; reader goroutine only

	// Read cursor (under s.mu; the cursor is moved by the reader only): reads start at the cursor
	// instead of at the shard's earliest due task, so tasks already in
	// flight are not walked past on every wake-up: at the cursor itself, or
	// at the earliest due time of the tasks the store reports committed
	// behind it, when the store reports them (DueLowStore); else at
	// cursor-cursorLag. A full read (from the start) runs when rescan is
	// set, a task went back to pending (released or parked), and at least
	// every fullEvery as a backstop. A read from before the cursor that
	// stopped at its limit, or a written result that made a task pending
	// behind the cursor, leaves carry: the next read starts there (or
	// before). Written under s.mu, as the cursor is.
	cursor      time.Time
	lastFull    time.Time
	cursorRead  bool // the last read started at the cursor: a full read is due by lastFull+fullEvery
	rescan      atomic.Bool
	lows        DueLowStore   // the store's, or nil
	lowsTracker DueLowTracker // the store's, when its reports can lapse, or nil
	carry       time.Time
	carrySet    bool
	// nextDue is the shard's first due time after the last read's now, when
	// that read's walk reached it (nextKnown); nextWake then needs no
	// lookup of its own. Reader goroutine only.
	nextDue   time.Time
	nextKnown bool

	room atomic.Bool // a group this shard holds tasks for has room (roomFor)
	dry  atomic.Bool // a key this shard deferred tasks of ran dry (recall.go)
	// recallCheck is when the reader next looks for room to recall
	// deferred tasks without being told (recall.go, recallBackstop).
	// Reader goroutine only.
	recallCheck time.Time

	ho handover // a hand-over before a planned move (handover.go)

	// depth is this shard's fusebox_queue_depth series, refreshed by the
	// reader only when the pending count can have changed: a read loaded
	// tasks, or results were written since (depthWritten). A wake-up that
	// loads nothing (most of them with many shards on the Raft store, where
	// every commit wakes every reader) costs no store lookup (with
	// PostgreSQL, no count query).
	depth        prometheus.Gauge
	depthWritten uint64
	depthSet     bool

	wakeups atomic.Uint64 // reader loop iterations (tests)
	reads   atomic.Uint64 // Due calls (tests)
	offers  atomic.Uint64 // tasks offered to the scheduler, taken or refused (tests)
}

func newShard(q *Queue, id int, epoch uint64) *shard {
	s := &shard{
		id: id, epoch: epoch, q: q,
		stopRead: make(chan struct{}), stopFlush: make(chan struct{}),
		readerDone: make(chan struct{}), flusherDone: make(chan struct{}),
		wake: make(chan struct{}, 1), kick: make(chan struct{}, 1),
		inflight: make(map[string]*item), parked: make(map[string]time.Time),
		releases: make(map[breakerpool.Key]*release),
		depth:    q.m.depth.WithLabelValues(strconv.Itoa(id)),
		ho:       newHandover(),
	}
	s.lows, _ = q.store.(DueLowStore)
	s.lowsTracker, _ = q.store.(DueLowTracker)
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.rctx, s.rstop = context.WithCancel(s.ctx)
	s.fctx, s.fstop = context.WithCancel(context.Background())
	go s.readLoop()
	go s.flushLoop()
	return s
}

func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// finish records a result for writing. After the shard is lost the result
// is dropped (a call it answers was counted by lose as in flight).
func (s *shard) finish(it *item, r Result) {
	s.mu.Lock()
	s.endOut(it, time.Now())
	if s.lost {
		s.mu.Unlock()
		return
	}
	s.results = append(s.results, r)
	s.called = append(s.called, it.called)
	s.finished++
	s.mu.Unlock()
	signal(s.kick)
}

// release forgets an in-flight task without writing anything: it is still
// pending in the store and will be offered again (not before park, if > 0).
// A task a release walk dispatched early (release.go) and never called is
// written back due after park instead (returnReleased).
func (s *shard) release(it *item, park time.Duration) {
	if it.rel != nil && !it.called && s.ctx.Err() == nil && !s.q.closing.Load() {
		s.returnReleased(it, park)
		return
	}
	s.q.m.results.WithLabelValues(outcomeReleased).Inc()
	s.mu.Lock()
	s.endOut(it, time.Now())
	if s.inflight[it.task.ID] == it {
		s.untrack(it)
		if park > 0 && !s.lost {
			s.parked[it.task.ID] = time.Now().Add(park)
		}
	}
	s.mu.Unlock()
	s.rescan.Store(true) // pending again, possibly before the cursor
	signal(s.wake)
}

// lose stops all work on the shard at once: the shard moved or a write was
// refused for a stale epoch. Calls under way are cancelled (their results
// would be refused) and counted as possible duplicates, as are answered
// results not yet written. It does not wait for the goroutines.
func (s *shard) lose(reason string) {
	s.rstop() // a database read under s.mu (a release walk's, a recall's) ends at once
	s.mu.Lock()
	if s.lost {
		s.mu.Unlock()
		return
	}
	s.lost = true
	calling := 0
	for _, it := range s.inflight {
		if it.calling.Load() {
			calling++
		}
	}
	unacked := 0
	for i, r := range s.results {
		if s.called[i] && r.Status != StatusPending {
			unacked++
		}
	}
	s.results, s.called = nil, nil
	s.mu.Unlock()
	s.q.m.abandoned.WithLabelValues("in_flight").Add(float64(calling))
	s.q.m.abandoned.WithLabelValues("unacked").Add(float64(unacked))
	s.q.log.Info("shard work stopped", "shard", s.id, "epoch", s.epoch, "reason", reason,
		"calls_in_flight", calling, "unwritten_results", unacked)
	s.cancel()
	s.fstop()
	s.stopReading()
	s.flushOnce.Do(func() { close(s.stopFlush) })
}

// stopReading ends the reader: at its next turn, or at once from a
// database read (rctx). Idempotent.
func (s *shard) stopReading() {
	s.readOnce.Do(func() {
		close(s.stopRead)
		s.rstop()
	})
}

func (s *shard) isLost() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lost
}

// wait blocks until both goroutines have returned.
func (s *shard) wait() {
	<-s.readerDone
	<-s.flusherDone
}

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

// flushLoop writes results in batches: it waits FlushInterval after the
// first result so that Raft sees few large writes, or writes at once when
// MaxFlushBatch are waiting.
func (s *shard) flushLoop() {
	defer close(s.flusherDone)
	cfg := s.q.cfg
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	for {
		select {
		case <-s.kick:
		case <-s.stopFlush:
			s.final()
			return
		}
		if s.pending() < cfg.MaxFlushBatch {
			timer.Reset(cfg.FlushInterval)
			select {
			case <-timer.C:
			case <-s.stopFlush:
				s.final()
				return
			}
		}
		for fails := 0; ; {
			err := s.flush(s.fctx)
			if err == nil || errors.Is(err, shardmap.ErrWrongOwner) {
				break
			}
			fails++
			timer.Reset(min(cfg.FlushInterval<<min(fails, 20), DefaultFlushRetryMax))
			select {
			case <-timer.C:
			case <-s.stopFlush:
				s.final()
				return
			}
		}
	}
}

func (s *shard) pending() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.results)
}

// final makes the last write at Close (nothing if the shard was lost).
func (s *shard) final() {
	if s.isLost() {
		return
	}
	ctx, cancel := context.WithTimeout(s.fctx, s.q.cfg.FlushTimeout)
	defer cancel()
	if err := s.flush(ctx); err != nil && !errors.Is(err, shardmap.ErrWrongOwner) {
		s.q.log.Warn("last result write failed; the tasks stay pending", "shard", s.id, "error", err)
	}
}

// putBack returns an unwritten batch to the shard's results. If the shard
// was lost while the batch was being written, lose did not see it: its
// answered calls are counted as possible duplicates here instead.
func (s *shard) putBack(batch []Result, called []bool) {
	s.mu.Lock()
	lost := s.lost
	if !lost {
		s.results, s.called = append(batch, s.results...), append(called, s.called...)
	}
	s.mu.Unlock()
	if lost {
		unacked := 0
		for i, r := range batch {
			if called[i] && r.Status != StatusPending {
				unacked++
			}
		}
		s.q.m.abandoned.WithLabelValues("unacked").Add(float64(unacked))
	}
}

// flush writes every waiting result, MaxFlushBatch at a time. A refused
// write (stale epoch) loses the shard; another error puts the batch back.
func (s *shard) flush(ctx context.Context) error {
	q := s.q
	for {
		s.mu.Lock()
		marks := s.takeMarks(q.cfg.MaxFlushBatch, time.Now()) // redelivery.go
		if s.lost || len(s.results)+len(marks) == 0 {
			young := !s.lost && len(s.marks) > 0
			s.mu.Unlock()
			if young { // calls too young for a marker: look again in a flush
				signal(s.kick)
			}
			return nil
		}
		n := flushCount(s.results, q.cfg.MaxFlushBatch-len(marks))
		batch, called := s.results[:n:n], s.called[:n:n]
		s.results, s.called = s.results[n:], s.called[n:]
		batch, called = s.dropSettled(batch, called)
		if len(marks) > 0 {
			batch, called = append(marks, batch...), append(make([]bool, len(marks)), called...)
		}
		if len(batch) == 0 {
			s.mu.Unlock()
			continue
		}
		s.mu.Unlock()

		err := q.store.Complete(ctx, s.id, s.epoch, batch)
		q.m.writeSize.Observe(float64(n))
		if errors.Is(err, state.ErrInvalidArgument) {
			// Refused for what it holds, it would be refused again: find
			// the result(s) at fault instead of retrying the batch forever.
			q.m.writes.WithLabelValues("error").Inc()
			q.log.Error("result write refused as invalid; writing its results one at a time", "shard", s.id, "results", len(batch), "error", err)
			if err := s.writeOneByOne(ctx, batch, called); err != nil {
				return err
			}
			continue
		}
		if err := s.bookWrite(batch, called, err); err != nil {
			return err
		}
		signal(s.wake)
		signal(s.ho.flushed)
	}
}
