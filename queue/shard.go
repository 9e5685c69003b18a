package queue

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"fusebox/breakerpool"
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

	stopRead    chan struct{}
	stopFlush   chan struct{}
	readOnce    sync.Once
	flushOnce   sync.Once
	readerDone  chan struct{}
	flusherDone chan struct{}
	wake        chan struct{} // 1-slot: an in-flight task left, or a limit changed
	kick        chan struct{} // 1-slot: results are waiting

	mu       sync.Mutex
	inflight map[string]*item         // dispatched, result not yet written
	parked   map[string]parkedTask    // refused by a full buffer: not offered again before
	rescan   map[breakerpool.Key]bool // destinations with a task pending again (released, parked): read from the start
	results  []Result
	called   []bool // parallel to results: the result answers a call
	lost     bool

	// Reader goroutine only (reader.go).
	dests     map[breakerpool.Key]*destRead // read position per destination
	active    []breakerpool.Key             // destinations the last read took tasks from (breaker not open)
	rr        int                           // round-robin start over destinations
	deferWake time.Time                     // when to look again at destinations passed over for an open breaker

	wakeups atomic.Uint64 // reader loop iterations (tests)
	reads   atomic.Uint64 // Due calls (tests)
}

func newShard(q *Queue, id int, epoch uint64) *shard {
	s := &shard{
		id: id, epoch: epoch, q: q,
		stopRead: make(chan struct{}), stopFlush: make(chan struct{}),
		readerDone: make(chan struct{}), flusherDone: make(chan struct{}),
		wake: make(chan struct{}, 1), kick: make(chan struct{}, 1),
		inflight: make(map[string]*item), parked: make(map[string]parkedTask),
		rescan: make(map[breakerpool.Key]bool), dests: make(map[breakerpool.Key]*destRead),
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
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
	if s.lost {
		s.mu.Unlock()
		return
	}
	s.results = append(s.results, r)
	s.called = append(s.called, it.called)
	s.mu.Unlock()
	signal(s.kick)
}

// release forgets an in-flight task without writing anything: it is still
// pending in the store and will be offered again (not before park, if > 0).
func (s *shard) release(it *item, park time.Duration) {
	s.q.m.results.WithLabelValues(outcomeReleased).Inc()
	s.mu.Lock()
	if s.inflight[it.task.ID] == it {
		delete(s.inflight, it.task.ID)
		if park > 0 && !s.lost {
			s.parked[it.task.ID] = parkedTask{at: time.Now().Add(park), key: it.task.Key()}
		}
		s.rescan[it.task.Key()] = true // pending again, possibly before the cursor
	}
	s.mu.Unlock()
	signal(s.wake)
}

// lose stops all work on the shard at once: the shard moved or a write was
// refused for a stale epoch. Calls under way are cancelled (their results
// would be refused) and counted as possible duplicates, as are answered
// results not yet written. It does not wait for the goroutines.
func (s *shard) lose(reason string) {
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
	s.q.m.duplicates.WithLabelValues("in_flight").Add(float64(calling))
	s.q.m.duplicates.WithLabelValues("unacked").Add(float64(unacked))
	s.q.log.Info("shard work stopped", "shard", s.id, "epoch", s.epoch, "reason", reason,
		"calls_in_flight", calling, "unwritten_results", unacked)
	s.cancel()
	s.fstop()
	s.readOnce.Do(func() { close(s.stopRead) })
	s.flushOnce.Do(func() { close(s.stopFlush) })
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
		s.q.m.duplicates.WithLabelValues("unacked").Add(float64(unacked))
	}
}

// flush writes every waiting result, MaxFlushBatch at a time. A refused
// write (stale epoch) loses the shard; another error puts the batch back.
func (s *shard) flush(ctx context.Context) error {
	q := s.q
	for {
		s.mu.Lock()
		if s.lost || len(s.results) == 0 {
			s.mu.Unlock()
			return nil
		}
		n := min(len(s.results), q.cfg.MaxFlushBatch)
		batch, called := s.results[:n:n], s.called[:n:n]
		s.results, s.called = s.results[n:], s.called[n:]
		s.mu.Unlock()

		err := q.store.Complete(ctx, s.id, s.epoch, batch)
		q.m.writeSize.Observe(float64(n))
		var wrong *shardmap.WrongOwnerError
		switch {
		case errors.As(err, &wrong):
			q.m.writes.WithLabelValues("refused").Inc()
			s.putBack(batch, called) // counted by lose
			s.lose("result write refused: " + wrong.Error())
			return err
		case err != nil:
			q.m.writes.WithLabelValues("error").Inc()
			q.log.Warn("result write failed, will retry", "shard", s.id, "results", n, "error", err)
			s.putBack(batch, called)
			return err
		}
		q.m.writes.WithLabelValues("ok").Inc()
		s.mu.Lock()
		for i := range batch {
			delete(s.inflight, batch[i].TaskID)
		}
		s.mu.Unlock()
		signal(s.wake)
	}
}
