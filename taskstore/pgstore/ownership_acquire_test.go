package pgstore

import (
	"context"
	"errors"
	"maps"
	"sync"
	"testing"
	"time"

	"fusebox/internal/testwait"
	"fusebox/queue"
	"fusebox/queue/queuetest"
	"fusebox/shardmap"
)

// hangingAcquirer raises epochs at once, except for the shards in hang:
// those wait for release (then succeed) or for their context (then fail
// with its error), as an Acquire to a database that does not answer does.
// Without a next, a raise only succeeds.
type hangingAcquirer struct {
	next    Acquirer
	hang    map[int]bool
	release chan struct{}

	mu        sync.Mutex
	waiting   int // acquires hanging now
	cancelled int
}

func newHangingAcquirer(next Acquirer, hang ...int) *hangingAcquirer {
	a := &hangingAcquirer{next: next, hang: make(map[int]bool), release: make(chan struct{})}
	for _, s := range hang {
		a.hang[s] = true
	}
	return a
}

func (a *hangingAcquirer) Acquire(ctx context.Context, shard int, node string, epoch uint64) error {
	if a.hang[shard] {
		a.mu.Lock()
		a.waiting++
		a.mu.Unlock()
		defer func() {
			a.mu.Lock()
			a.waiting--
			a.mu.Unlock()
		}()
		select {
		case <-a.release:
		case <-ctx.Done():
			a.mu.Lock()
			a.cancelled++
			a.mu.Unlock()
			return ctx.Err()
		}
	}
	if a.next == nil {
		return nil
	}
	return a.next.Acquire(ctx, shard, node, epoch)
}

func (a *hangingAcquirer) counts() (waiting, cancelled int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.waiting, a.cancelled
}

// watchFor calls Watch until it hands over exactly want, waiting for its
// channel between calls (as the queue does).
func watchFor(t *testing.T, f *FencedOwnership, want map[int]uint64) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		owned, changed := f.Watch()
		if maps.Equal(owned, want) {
			return
		}
		select {
		case <-changed:
		case <-deadline:
			t.Fatalf("Watch hands over %v, want %v", owned, want)
		}
	}
}

// watchReturns calls Watch and fails the test if it has not returned
// within a deadline: Watch must not wait for the database.
func watchReturns(t *testing.T, f *FencedOwnership) map[int]uint64 {
	t.Helper()
	got := make(chan map[int]uint64, 1)
	go func() {
		owned, _ := f.Watch()
		got <- owned
	}()
	select {
	case owned := <-got:
		return owned
	case <-time.After(10 * time.Second):
		t.Fatal("Watch waited for the database: acquires that do not answer held it")
		return nil
	}
}

// TestWatchDoesNotWaitForAcquires: the map moves shard 0 away and gives
// this node three shards whose acquires hang (a database that does not
// answer). Watch returns at once without shard 0 and without the three, so
// the queue stops shard 0 now rather than after every acquire has timed
// out (5 s each, one after the other, before); the three are handed over
// once their acquires succeed.
func TestWatchDoesNotWaitForAcquires(t *testing.T) {
	inner := queuetest.NewOwnership(map[int]uint64{0: 1})
	acq := newHangingAcquirer(nil, 1, 2, 3)
	f := NewFencedOwnership(inner, acq, "n1", nil)
	t.Cleanup(f.Close)
	watchFor(t, f, map[int]uint64{0: 1})

	inner.Set(map[int]uint64{1: 2, 2: 2, 3: 2})
	if owned := watchReturns(t, f); len(owned) != 0 {
		t.Fatalf("Watch handed over %v while no acquire had answered", owned)
	}
	close(acq.release)
	watchFor(t, f, map[int]uint64{1: 2, 2: 2, 3: 2})
}

// TestCloseEndsHangingAcquires: Close cancels the acquires under way and
// returns; a Watch after it starts none.
func TestCloseEndsHangingAcquires(t *testing.T) {
	acq := newHangingAcquirer(nil, 0, 1)
	f := NewFencedOwnership(queuetest.NewOwnership(map[int]uint64{0: 1, 1: 1}), acq, "n1", nil)
	if owned := watchReturns(t, f); len(owned) != 0 {
		t.Fatalf("handed over %v", owned)
	}
	testwait.For(t, 10*time.Second, "both acquires under way", func() bool { w, _ := acq.counts(); return w == 2 })
	closed := make(chan struct{})
	go func() {
		f.Close()
		f.Close() // idempotent
		close(closed)
	}()
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("Close waited for acquires that do not answer")
	}
	if w, c := acq.counts(); w != 0 || c != 2 {
		t.Fatalf("after Close: %d acquires hanging, %d cancelled; want 0 and 2", w, c)
	}
	if owned, _ := f.Watch(); len(owned) != 0 {
		t.Fatalf("after Close, Watch handed over %v", owned)
	}
}

// TestFailedAcquireRetried: an acquire refused by the database (a higher
// epoch already taken) is tried again after RetryAfter, not at every Watch,
// and the shard is handed over once the map catches up.
func TestFailedAcquireRetried(t *testing.T) {
	s := openTest(t)
	if err := s.Acquire(t.Context(), 0, "other", 5); err != nil {
		t.Fatal(err)
	}
	inner := queuetest.NewOwnership(map[int]uint64{0: 4})
	f := NewFencedOwnership(inner, s, "n1", nil)
	f.RetryAfter = 20 * time.Millisecond
	t.Cleanup(f.Close)
	// Three wake-ups, each a retry that is refused again.
	for range 3 {
		owned, retry := f.Watch()
		if len(owned) != 0 {
			t.Fatalf("a stale map's shard was handed over: %v", owned)
		}
		select {
		case <-retry:
		case <-time.After(10 * time.Second):
			t.Fatal("a refused acquire did not wake the queue for a retry")
		}
	}
	inner.Set(map[int]uint64{0: 6})
	watchFor(t, f, map[int]uint64{0: 6})
}

// TestQueueStopsAMovedShardWhileAcquiresHang runs the queue over the fenced
// ownership: when the map moves shard 0 away and gives the node shards
// whose acquires hang, the queue stops shard 0 at once, and its Close is not
// held by the acquires either.
func TestQueueStopsAMovedShardWhileAcquiresHang(t *testing.T) {
	s := openTest(t)
	reg, pool, exec := queueParts(t)
	inner := queuetest.NewOwnership(map[int]uint64{0: 1})
	acq := newHangingAcquirer(s, 1, 2, 3, 4)
	own := NewFencedOwnership(inner, acq, "a", nil)
	t.Cleanup(own.Close)
	q, err := queue.New(queue.Config{NodeID: "a", DrainTimeout: 5 * time.Second}, queue.Deps{
		Store: s, Ownership: own, Limits: queuetest.NewLimits(queuetest.DefaultLimits()),
		Breakers: queue.PoolBreakers(pool), Executor: exec, Registerer: reg,
	})
	if err != nil {
		t.Fatal(err)
	}
	q.Start()
	closed := false
	t.Cleanup(func() {
		if !closed {
			_ = q.Close()
		}
	})
	shardGauge := func() bool { _, ok := series(t, reg, "fusebox_queue_depth", "shard", "0"); return ok }
	testwait.For(t, 10*time.Second, "shard 0 worked", shardGauge)

	inner.Set(map[int]uint64{1: 2, 2: 2, 3: 2, 4: 2})
	testwait.For(t, 10*time.Second, "shard 0 stopped while the new shards' acquires hang", func() bool { return !shardGauge() })
	done := make(chan error, 1)
	go func() { done <- q.Close() }()
	select {
	case err := <-done:
		closed = true
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the queue's Close waited for acquires that do not answer")
	}
}

// TestRefusedBelowTheAcquiredEpochTakesAgain: a write refused by a fence
// below the epoch this node acquired (the database went back) makes the
// ownership take the shard again at its epoch — Watch leaves it out until
// the acquire ends, then hands it over; a refusal by a newer owner's fence
// (or one for an epoch this node does not hold) changes nothing.
func TestRefusedBelowTheAcquiredEpochTakesAgain(t *testing.T) {
	s := openTest(t)
	f := NewFencedOwnership(queuetest.NewOwnership(map[int]uint64{0: 4, 1: 4}), s, "n1", nil)
	t.Cleanup(f.Close)
	watchFor(t, f, map[int]uint64{0: 4, 1: 4})

	if f.Refused(1, 4, &shardmap.WrongOwnerError{Shard: 1, Owner: "n2", Epoch: 5}) {
		t.Fatal("a refusal by a newer owner's fence asked for the shard to be taken again")
	}
	if f.Refused(1, 3, &shardmap.WrongOwnerError{Shard: 1, Owner: "n2", Epoch: 2}) {
		t.Fatal("a refusal at an epoch this node does not hold asked for the shard to be taken again")
	}
	if _, err := s.pool.Exec(t.Context(), `UPDATE fusebox_shards SET epoch = 3, owner = 'n0' WHERE shard = 0`); err != nil {
		t.Fatal(err)
	}
	err := s.Complete(t.Context(), 0, 4, []queue.Result{{TaskID: "any", Status: queue.StatusSucceeded}})
	var wrong *shardmap.WrongOwnerError
	if !errors.As(err, &wrong) || wrong.Epoch != 3 {
		t.Fatalf("write under the fence gone back: %v, want a refusal naming epoch 3", err)
	}
	if !f.Refused(0, 4, wrong) {
		t.Fatal("a refusal by a fence gone back did not ask for the shard to be taken again")
	}
	watchFor(t, f, map[int]uint64{0: 4, 1: 4})
	fences, err := s.Fences(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if got := fences[0]; got.Owner != "n1" || got.Epoch != 4 {
		t.Fatalf("fence of shard 0 after the retake: %+v, want n1@4", got)
	}
	if err := s.Complete(t.Context(), 0, 4, []queue.Result{{TaskID: "any", Status: queue.StatusSucceeded}}); err != nil {
		t.Fatalf("write after the retake: %v", err)
	}
}
