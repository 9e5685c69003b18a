package queue_test

import (
	"context"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"fusebox/internal/testwait"
	"fusebox/queue"
	"fusebox/queue/queuetest"
	"fusebox/transport"
)

// unreachableStore's result writes hang while cut is set, until their
// context ends or the cut heals, as writes to a database this node cannot
// reach do.
type unreachableStore struct {
	*queuetest.Store
	cut     atomic.Bool
	healed  chan struct{}
	hanging atomic.Int32 // writes hanging now
}

func (s *unreachableStore) Complete(ctx context.Context, shard int, epoch uint64, results []queue.Result) error {
	if s.cut.Load() {
		s.hanging.Add(1)
		defer s.hanging.Add(-1)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-s.healed:
		}
	}
	return s.Store.Complete(ctx, shard, epoch, results)
}

// TestHandOverCarriesUnwrittenResults: an owner whose result writes hang
// (its task store unreachable) is asked to hand its shard over. The answer
// carries the results it could not write — including the batch its hanging
// write holds — so the leader can write them at the owner's epoch before
// the move (node/handover.go) and the next owner does not make those calls
// again. Calls still under way are counted apart (UnderWay).
func TestHandOverCarriesUnwrittenResults(t *testing.T) {
	e := newEnv(t, 1, queuetest.DefaultLimits())
	store := &unreachableStore{Store: e.store, healed: make(chan struct{})}
	exec := newFakeExec(true)
	d := e.deps("a", exec)
	d.Store = store
	q := launch(t, fastCfg(), d)
	t.Cleanup(func() { close(store.healed) }) // before the queue's Close
	tasks := callbacks(3, 1, "cut", "d")
	e.add(t, tasks...)
	testwait.For(t, 10*time.Second, "three calls under way", func() bool { _, in, _ := exec.stats(); return in == 3 })
	// Their start markers written first, so that the hanging write below
	// holds the calls' results themselves.
	testwait.For(t, 10*time.Second, "the calls' start markers written", func() bool {
		for _, tk := range tasks {
			if got, _ := e.store.Task(tk.ID); got.AttemptEpoch == 0 {
				return false
			}
		}
		return true
	})
	store.cut.Store(true)

	// A call still under way: no results in the answer.
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	rel := q.HandOver(ctx, map[int]uint64{0: 1}, time.Minute)
	cancel()
	if len(rel) != 1 || rel[0].Unfinished != 3 || rel[0].UnderWay != 3 || rel[0].Results != nil {
		t.Fatalf("HandOver with calls under way answered %+v, want 3 unfinished calls and no results", rel)
	}

	close(exec.release) // the calls end; their results cannot be written
	testwait.For(t, 10*time.Second, "the results' write hanging", func() bool { return store.hanging.Load() > 0 })
	ctx, cancel = context.WithTimeout(t.Context(), 200*time.Millisecond)
	rel = q.HandOver(ctx, map[int]uint64{0: 1}, time.Minute)
	cancel()
	if len(rel) != 1 || rel[0].Unfinished != 3 || rel[0].UnderWay != 0 {
		t.Fatalf("HandOver answered %+v, want shard 0 with 3 results unwritten", rel)
	}
	var got []string
	for _, r := range rel[0].Results {
		if r.Status != queue.StatusSucceeded || r.Attempts != 1 || r.Started {
			t.Fatalf("result handed over %+v, want the call's success", r)
		}
		got = append(got, r.TaskID)
	}
	var want []string
	for _, tk := range tasks {
		want = append(want, tk.ID)
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("results handed over for %v, want %v", got, want)
	}
	for _, tk := range tasks {
		if got, _ := e.store.Task(tk.ID); got.Status != queue.StatusPending {
			t.Fatalf("task %s is %q: a write landed though the store was cut", tk.ID, got.Status)
		}
	}

	// A node that knows it cannot write answers as soon as its calls have
	// ended, not at the end of the leader's wait.
	ctx, cancel = context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	rel2 := q.HandOverUnwritable(ctx, map[int]uint64{0: 1}, time.Minute)
	if ctx.Err() != nil {
		t.Fatal("HandOverUnwritable waited out its context for writes that could not land")
	}
	if len(rel2) != 1 || rel2[0].Unfinished != 3 || len(rel2[0].Results) != 3 {
		t.Fatalf("HandOverUnwritable answered %+v, want the 3 unwritten results", rel2)
	}
}

// TestHandOverCarriesResultsBesideACallUnderWay: one call of the shard is
// still under way at the end of the wait (a slow destination); the results
// of the calls that did end go to the leader all the same, and the slow
// call is counted as under way.
func TestHandOverCarriesResultsBesideACallUnderWay(t *testing.T) {
	e := newEnv(t, 1, queuetest.DefaultLimits())
	store := &unreachableStore{Store: e.store, healed: make(chan struct{})}
	const slowURL = "http://127.0.0.1:9/slow"
	slow := make(chan struct{})
	exec := newFakeExec(false)
	exec.answer = func(r transport.Request) (transport.Result, error) {
		if r.URL == slowURL {
			<-slow
		}
		return transport.Result{Outcome: transport.OutcomeSucceeded, Status: 200}, nil
	}
	d := e.deps("a", exec)
	d.Store = store
	q := launch(t, fastCfg(), d)
	t.Cleanup(func() { close(store.healed) })
	t.Cleanup(func() { close(slow) })
	store.cut.Store(true)
	fast := callbacks(2, 1, "fast", "d")
	e.add(t, append(fast, callback("slow-000", 0, "slow", slowURL))...)
	testwait.For(t, 10*time.Second, "the fast calls answered, the slow one under way", func() bool {
		calls, in, _ := exec.stats()
		return calls == 3 && in == 1
	})
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	rel := q.HandOverUnwritable(ctx, map[int]uint64{0: 1}, time.Minute)
	if len(rel) != 1 || rel[0].UnderWay != 1 || rel[0].Unfinished != 3 || len(rel[0].Results) != 2 {
		t.Fatalf("HandOver answered %+v, want 1 call under way and the 2 answered calls' results", rel)
	}
	for i, r := range rel[0].Results {
		if r.TaskID != fast[0].ID && r.TaskID != fast[1].ID || r.Status != queue.StatusSucceeded {
			t.Fatalf("result %d handed over: %+v", i, r)
		}
	}
}
