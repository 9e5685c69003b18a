package queue

import (
	"context"
	"errors"
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
	// writing is the batch a write has taken from results and not yet
	// booked (written, or put back): with results, what is unwritten.
	writing []Result
	lost    bool
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
	s.writing = nil
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
		s.writing = batch
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
