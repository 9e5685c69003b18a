package queue

import (
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Queue runs the outbound task queue of one node: a reader per owned shard
// and the host-wide group scheduler.
type Queue struct {
	cfg      Config
	store    Store
	own      Ownership
	limits   LimitsSource
	breakers Breakers
	exec     Executor
	resolver Resolver
	policy   DestinationPolicy
	fleet    FleetShare
	delegate Delegator
	log      *slog.Logger
	m        *metrics
	sched    *scheduler

	closing   atomic.Bool
	closingCh chan struct{} // closed when Close begins: token waiters give up
	paused    atomic.Int64

	mu     sync.Mutex // guards shards, started
	shards map[int]*shard

	startOnce sync.Once
	closeOnce sync.Once
	stop      chan struct{}
	rewatch   chan struct{} // size 1: Watch again now (RefusalOwnership)
	loopsDone sync.WaitGroup
	unsub     func()
}

// New builds a queue; Start begins work.
func New(cfg Config, deps Deps) (*Queue, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if err := deps.validate(); err != nil {
		return nil, err
	}
	log := deps.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	q := &Queue{
		cfg: cfg, store: deps.Store, own: deps.Ownership, limits: deps.Limits, breakers: deps.Breakers,
		exec: deps.Executor, resolver: deps.Resolver, policy: deps.Policy, fleet: deps.Fleet, delegate: deps.Delegate, log: log.With("component", "queue"),
		shards: make(map[int]*shard), stop: make(chan struct{}), closingCh: make(chan struct{}), rewatch: make(chan struct{}, 1),
	}
	q.sched = newScheduler(q)
	if q.m, err = newMetrics(deps.Registerer, q); err != nil {
		return nil, err
	}
	return q, nil
}

// Start follows shard ownership and limit changes. It is a no-op after the
// first call or after Close.
func (q *Queue) Start() {
	q.startOnce.Do(func() {
		if q.closing.Load() {
			return
		}
		q.unsub = q.limits.Subscribe(q.limitsChanged)
		q.loopsDone.Add(3)
		go q.watchOwnership()
		go q.gcLoop()
		go q.rampLoop()
	})
}

// limitsChanged applies new limits to groups and wakes every reader (a
// batch size leaving 0 restarts reading).
func (q *Queue) limitsChanged() {
	q.sched.refresh()
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, s := range q.shards {
		signal(s.wake)
	}
}

func (q *Queue) watchOwnership() {
	defer q.loopsDone.Done()
	for {
		owned, changed := q.own.Watch()
		q.reconcile(owned)
		select {
		case <-changed:
		case <-q.rewatch:
		case <-q.stop:
			return
		}
	}
}

// rewatchSoon makes the ownership loop Watch again without waiting for a
// change (coalesced).
func (q *Queue) rewatchSoon() {
	select {
	case q.rewatch <- struct{}{}:
	default:
	}
}

// reconcile stops work on shards no longer owned at the same epoch and
// starts it on newly owned ones. A shard lost by a refused write stays
// stopped until its epoch changes, or until Watch leaves it out for a
// while (RefusalOwnership: taken again at the same epoch).
//
// Every shard that moved stops at once, then their goroutines are waited
// for together: one waited for in turn (a result write or a read the
// database was slow to end) used to keep the next one working, and
// calling, until it ended.
func (q *Queue) reconcile(owned map[int]uint64) {
	q.mu.Lock()
	defer q.mu.Unlock()
	var gone []*shard
	for id, s := range q.shards {
		if e, ok := owned[id]; ok && e == s.epoch {
			continue
		}
		s.lose("shard moved")
		gone = append(gone, s)
	}
	for _, s := range gone {
		s.wait()
		delete(q.shards, s.id)
		q.m.depth.DeleteLabelValues(strconv.Itoa(s.id))
	}
	for id, e := range owned {
		if _, ok := q.shards[id]; !ok {
			q.shards[id] = newShard(q, id, e)
			q.log.Info("shard work started", "shard", id, "epoch", e)
		}
	}
}

func (q *Queue) gcLoop() {
	defer q.loopsDone.Done()
	t := time.NewTicker(q.cfg.GCInterval)
	defer t.Stop()
	for {
		select {
		case now := <-t.C:
			if n := q.sched.gc(now); n > 0 {
				q.log.Debug("idle scheduler groups removed", "groups", n)
			}
		case <-q.stop:
			return
		}
	}
}

func (q *Queue) ownedCount() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	n := 0
	for _, s := range q.shards {
		if !s.isLost() {
			n++
		}
	}
	return n
}

// Close stops the readers, lets calls under way finish for up to
// DrainTimeout (then cancels them), writes the last results and returns
// once every goroutine of the queue has ended. Tasks not finished stay
// pending in the store. Close is idempotent.
func (q *Queue) Close() error {
	q.closeOnce.Do(func() {
		q.closing.Store(true)
		close(q.closingCh)
		q.startOnce.Do(func() {}) // a later Start is a no-op
		close(q.stop)
		q.loopsDone.Wait()
		if q.unsub != nil {
			q.unsub()
		}
		q.sched.close()

		q.mu.Lock()
		shards := make([]*shard, 0, len(q.shards))
		for _, s := range q.shards {
			shards = append(shards, s)
		}
		q.mu.Unlock()
		for _, s := range shards {
			s.stopReading() // a database read under way ends at once
		}
		for _, s := range shards {
			<-s.readerDone
		}

		drained := make(chan struct{})
		go func() { q.sched.wg.Wait(); close(drained) }()
		deadline := time.NewTimer(q.cfg.DrainTimeout)
		defer deadline.Stop()
		select {
		case <-drained:
		case <-deadline.C:
			q.log.Warn("drain timeout: cancelling calls under way", "timeout", q.cfg.DrainTimeout)
			for _, s := range shards {
				s.cancel()
			}
			<-drained
		}

		for _, s := range shards {
			s.flushOnce.Do(func() { close(s.stopFlush) })
		}
		// A write under way when the flushers were told to stop has no
		// deadline of its own: with the store hung (PostgreSQL paused, a
		// connection stuck in its handshake), Close waited for it for good
		// and the node's shutdown ended in its hard timeout, exit 1, never
		// leaving the cluster. So the writers get FlushTimeout for the write
		// under way and the last one (final), then their writes are
		// cancelled: what is unwritten stays pending in the store.
		writers := time.NewTimer(2 * q.cfg.FlushTimeout)
		defer writers.Stop()
		for _, s := range shards {
			select {
			case <-s.flusherDone:
			case <-writers.C:
				q.log.Warn("result writes did not finish: cancelling them; their tasks stay pending", "timeout", 2*q.cfg.FlushTimeout)
				for _, s := range shards {
					s.fstop()
				}
				<-s.flusherDone
			}
			s.cancel()
			s.fstop()
		}
		q.mu.Lock()
		clear(q.shards)
		q.mu.Unlock()
		q.m.depth.Reset()
	})
	return nil
}
