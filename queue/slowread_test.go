package queue_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"fusebox/breakerpool"
	"fusebox/internal/testwait"
	"fusebox/queue"
	"fusebox/queue/queuetest"
	"fusebox/shardmap"
)

// slowReadStore is the test store with reads that hang once armed, as a
// database's do when it stops answering: Due until released,
// DueContext (queue.ContextDueStore, as the postgres store has it) until
// released or its context ends. (The test store calls skip under its own
// lock; no shard's lock is ever held while that one is taken.)
type slowReadStore struct {
	*queuetest.Store
	armed     atomic.Bool   // Due reads hang
	walkArmed atomic.Bool   // release walks' reads (Blocked) hang
	hanging   chan struct{} // a read hangs (1-slot)
	release   chan struct{}
}

func newSlowReadStore(s *queuetest.Store) *slowReadStore {
	return &slowReadStore{Store: s, hanging: make(chan struct{}, 1), release: make(chan struct{})}
}

func (s *slowReadStore) hang(ctx context.Context, armed *atomic.Bool) {
	if !armed.Load() {
		return
	}
	select {
	case s.hanging <- struct{}{}:
	default:
	}
	select {
	case <-s.release:
	case <-ctx.Done():
	}
}

func (s *slowReadStore) Due(shard int, from, now time.Time, limit int, skip func(string) bool) ([]queue.Task, time.Time, bool) {
	s.hang(context.Background(), &s.armed)
	return s.Store.Due(shard, from, now, limit, skip)
}

func (s *slowReadStore) DueContext(ctx context.Context, shard int, from, now time.Time, limit int, skip func(string) bool) ([]queue.Task, time.Time, bool) {
	s.hang(ctx, &s.armed)
	if ctx.Err() != nil {
		return nil, time.Time{}, false
	}
	return s.Store.Due(shard, from, now, limit, skip)
}

func (s *slowReadStore) Blocked(shard int, k breakerpool.Key, after queue.Cursor, limit int, skip func(string) bool) ([]queue.Task, queue.Cursor, bool) {
	s.hang(context.Background(), &s.walkArmed)
	return s.Store.Blocked(shard, k, after, limit, skip)
}

func (s *slowReadStore) BlockedContext(ctx context.Context, shard int, k breakerpool.Key, after queue.Cursor, limit int, skip func(string) bool) ([]queue.Task, queue.Cursor, bool) {
	s.hang(ctx, &s.walkArmed)
	if ctx.Err() != nil {
		return nil, after, false
	}
	return s.Store.Blocked(shard, k, after, limit, skip)
}

func (s *slowReadStore) LaterContext(ctx context.Context, shard int, k breakerpool.Key, after queue.Cursor, until time.Time, limit int, skip func(string) bool) ([]queue.Task, queue.Cursor, bool) {
	return s.Store.Later(shard, k, after, until, limit, skip)
}

// A read the database does not answer holds up neither a call's result nor
// the shard's move. Before, the reader held the shard's lock through the
// read: the result of a call that ended meanwhile waited for the read's
// timeout (5 s with PostgreSQL), and so did the shard's loss, and the
// queue's lock with it (every other shard's move and hand-over). In
// TestPostgresUnreachableFromOneNode a call admitted before such a read
// went out 5 s after the cut, after its shard had moved.
func TestSlowReadHoldsUpNeitherResultsNorTheMove(t *testing.T) {
	e := newEnv(t, 1, queuetest.DefaultLimits())
	st := newSlowReadStore(e.store)
	exec := newFakeExec(true)
	d := e.deps("a", exec)
	d.Store = st
	e.q = launch(t, fastCfg(), d)
	t.Cleanup(func() { close(st.release) }) // first: the old code's reader hangs until then

	e.add(t, callback("a1", 0, "d", "http://dest.invalid/cb"))
	testwait.For(t, 10*time.Second, "a1's call under way", func() bool {
		_, inflight, _ := exec.stats()
		return inflight == 1
	})
	st.armed.Store(true)
	e.add(t, callback("a2", 0, "d", "http://dest.invalid/cb")) // wakes the reader; its read hangs
	select {
	case <-st.hanging:
	case <-time.After(10 * time.Second):
		t.Fatal("no read began after a2's submit")
	}
	close(exec.release) // a1's call answers
	testwait.For(t, 10*time.Second, "a1's result written while the read hangs", func() bool {
		got, _ := e.store.Task("a1")
		return got.Status == queue.StatusSucceeded
	})

	// The shard moves: its work stops at once, the read with it.
	if _, err := e.holder.Store(singleOwnerMap(t, 1, "b", 2, 2)); err != nil {
		t.Fatal(err)
	}
	waitShardStopped(t, e.q, 0, 10*time.Second, "shard 0's work stopped with its read hanging")
	if n, _, _ := exec.stats(); n != 1 {
		t.Fatalf("%d calls, want 1 (a1's; a2 was never read)", n)
	}
}

// A call admitted before a release walk's read that the database does not
// answer (made under the shard's lock), and waiting behind it for that
// lock, is not made once the shard has moved: as a due read did when it
// was made under the lock (TestPostgresUnreachableFromOneNode: a call 5 s
// after the cut, at the read's timeout, after its shard had moved).
// Whichever takes the lock first when the move cancels the read, the call
// or the loss, no call is made.
func TestCallWaitingBehindASlowWalkIsNotMadeAfterTheMove(t *testing.T) {
	e := newEnv(t, 1, queuetest.DefaultLimits())
	st := newSlowReadStore(e.store)
	e.add(t, blockedTasks(5, 1, "b", "dest")...)
	exec := newFakeExec(false)
	hb := holdCalls(t, e)
	d := e.deps("a", exec)
	d.Store, d.Breakers = st, hb
	d.Ownership = holderEpochOwnership{d.Ownership, e.holder, "a"}
	e.q = launch(t, fastCfg(), d)
	t.Cleanup(func() { close(st.release) }) // first: the old code's reader hangs until then

	e.add(t, callback("a1", 0, "d", "http://dest.invalid/cb"))
	hb.awaitHeld(t) // a1 admitted, held before its call
	st.walkArmed.Store(true)
	e.q.KeyClosed(key("dest")) // a release walk: its read hangs, holding the shard's lock
	select {
	case <-st.hanging:
	case <-time.After(10 * time.Second):
		t.Fatal("no release walk read began")
	}
	hb.open() // a1 goes on to its call, and waits for the shard's lock
	if _, err := e.holder.Store(singleOwnerMap(t, 1, "b", 2, 2)); err != nil {
		t.Fatal(err)
	}
	waitShardStopped(t, e.q, 0, 10*time.Second, "shard 0's work stopped with its walk's read hanging")
	requireNotCalled(t, e, exec)
}

// holderEpochOwnership answers OwnsAt from the map the holder holds, as
// the ownership manager does from the committed map.
type holderEpochOwnership struct {
	queue.Ownership
	h    *shardmap.Holder
	node string
}

func (o holderEpochOwnership) OwnsAt(shard int, epoch uint64) bool {
	m := o.h.Load()
	if m == nil {
		return false
	}
	a, ok := m.Owner(shard)
	return ok && a.Owner == o.node && a.Epoch == epoch
}

// holdBreakers holds every call past its admission check (the breaker's
// Allow) until release is closed: the moment between the queue's check of
// its ownership and the call.
type holdBreakers struct {
	queue.Breakers
	held    chan struct{} // a call is held (1-slot)
	release chan struct{}
	once    *sync.Once
}

// holdCalls wraps e's breakers; the held calls are let go at cleanup if
// the test did not (open).
func holdCalls(t *testing.T, e *env) holdBreakers {
	hb := holdBreakers{Breakers: queue.PoolBreakers(e.pool), held: make(chan struct{}, 1), release: make(chan struct{}), once: &sync.Once{}}
	t.Cleanup(hb.open)
	return hb
}

// open lets every held call go on. Idempotent.
func (h holdBreakers) open() { h.once.Do(func() { close(h.release) }) }

// awaitHeld waits for a call to be held at its breaker.
func (h holdBreakers) awaitHeld(t *testing.T) {
	t.Helper()
	select {
	case <-h.held:
	case <-time.After(10 * time.Second):
		t.Fatal("no call reached its breaker")
	}
}

// requireNotCalled waits for the held call's attempt to end, released or
// called, and fails if it was called.
func requireNotCalled(t *testing.T, e *env, exec *fakeExec) {
	t.Helper()
	testwait.For(t, 10*time.Second, "the attempt ended, released or called", func() bool {
		n, _, _ := exec.stats()
		return n > 0 || metric(t, e.reg, "fusebox_queue_task_results_total", map[string]string{"outcome": "released"}) >= 1
	})
	exec.mu.Lock()
	defer exec.mu.Unlock()
	if len(exec.calls) != 0 {
		var ids []string
		for _, c := range exec.calls {
			ids = append(ids, c.req.RequestID)
		}
		t.Fatalf("calls after the shard moved: %v, want none", ids)
	}
}

func (h holdBreakers) Breaker(k breakerpool.Key) breakerpool.TwoStepCircuitBreaker {
	return holdBreaker{h.Breakers.Breaker(k), h}
}

type holdBreaker struct {
	breakerpool.TwoStepCircuitBreaker
	h holdBreakers
}

func (b holdBreaker) Allow() (func(bool), error) {
	select {
	case b.h.held <- struct{}{}:
	default:
	}
	<-b.h.release
	return b.TwoStepCircuitBreaker.Allow()
}

// A call admitted before its shard moved, and held until the shard's work
// stopped, is not made: the next owner makes it.
func TestCallAdmittedBeforeTheMoveIsNotMade(t *testing.T) {
	e := newEnv(t, 1, queuetest.DefaultLimits())
	exec := newFakeExec(false)
	hb := holdCalls(t, e)
	d := e.deps("a", exec)
	d.Breakers = hb
	e.q = launch(t, fastCfg(), d)

	e.add(t, callback("a1", 0, "d", "http://dest.invalid/cb"))
	hb.awaitHeld(t)
	if _, err := e.holder.Store(singleOwnerMap(t, 1, "b", 2, 2)); err != nil {
		t.Fatal(err)
	}
	waitShardStopped(t, e.q, 0, 10*time.Second, "shard 0's work stopped")
	hb.open()
	requireNotCalled(t, e, exec)
	if got, _ := e.store.Task("a1"); got.Status != queue.StatusPending || got.Attempts != 0 {
		t.Fatalf("a1 %s after %d attempts, want pending, untouched, for the next owner", got.Status, got.Attempts)
	}
}

// Close does not wait for a read the database does not answer: the node's
// shutdown with the database cut off waited out the read's timeout.
func TestCloseEndsASlowRead(t *testing.T) {
	e := newEnv(t, 1, queuetest.DefaultLimits())
	st := newSlowReadStore(e.store)
	d := e.deps("a", newFakeExec(false))
	d.Store = st
	q := launch(t, fastCfg(), d)
	t.Cleanup(func() { close(st.release) }) // first: the old code's reader hangs until then

	st.armed.Store(true)
	e.add(t, callback("a1", 0, "d", "http://dest.invalid/cb"))
	select {
	case <-st.hanging:
	case <-time.After(10 * time.Second):
		t.Fatal("no read began after a1's submit")
	}
	closed := make(chan struct{})
	go func() { _ = q.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("Close still waiting for the hanging read after 10 s")
	}
}

// A release walk's read runs under the shard's lock; one the database does
// not answer no longer holds up the shard's move until its timeout: the
// loss cancels it before taking the lock.
func TestSlowReleaseWalkDoesNotHoldUpTheMove(t *testing.T) {
	e := newEnv(t, 1, queuetest.DefaultLimits())
	st := newSlowReadStore(e.store)
	e.add(t, blockedTasks(5, 1, "b", "dest")...)
	d := e.deps("a", newFakeExec(false))
	d.Store = st
	e.q = launch(t, fastCfg(), d)
	t.Cleanup(func() { close(st.release) }) // first: the old code's reader hangs until then
	testwait.For(t, 5*time.Second, "the shard to start", func() bool { _, ok := e.q.ShardState(0); return ok })

	st.walkArmed.Store(true)
	e.q.KeyClosed(key("dest")) // a release walk: its read hangs
	select {
	case <-st.hanging:
	case <-time.After(10 * time.Second):
		t.Fatal("no release walk read began")
	}
	if _, err := e.holder.Store(singleOwnerMap(t, 1, "b", 2, 2)); err != nil {
		t.Fatal(err)
	}
	waitShardStopped(t, e.q, 0, 10*time.Second, "shard 0's work stopped with its walk's read hanging")
}

// waitShardStopped waits up to d for the queue to have stopped its work on
// shard id. ShardState takes the queue's lock, which a stop held up keeps:
// it is asked from a goroutine, so a stop that never ends fails the test at
// d instead of hanging it.
func waitShardStopped(t *testing.T, q *queue.Queue, id int, d time.Duration, what string) {
	t.Helper()
	stopped := make(chan struct{})
	done := make(chan struct{})
	defer close(done)
	go func() {
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			if _, running := q.ShardState(id); !running {
				close(stopped)
				return
			}
			select {
			case <-tick.C:
			case <-done:
				return
			}
		}
	}()
	select {
	case <-stopped:
	case <-time.After(d):
		t.Fatalf("timed out after %v waiting for %s", d, what)
	}
}
