package pgstore

import (
	"testing"
	"time"

	"fusebox/queue"
	"fusebox/raftstore/state"
)

// Complete writes start markers and results in one statement; a task with
// both in one batch ends as its result says (attempt epoch 0), as when the
// marker was written first; a marker alone records the epoch and changes
// nothing else.
func TestCompleteMarkersAndResultsInOneBatch(t *testing.T) {
	s := openTest(t)
	ctx := t.Context()
	const shard, epoch = 3, 7
	if err := s.Acquire(ctx, shard, "n1", epoch); err != nil {
		t.Fatal(err)
	}
	a, b := wakeTask(1, shard), wakeTask(2, shard)
	if _, err := s.Submit(ctx, []state.NewTask{a, b}, time.Now()); err != nil {
		t.Fatal(err)
	}
	err := s.Complete(ctx, shard, epoch, []queue.Result{
		{TaskID: a.ID, Started: true},
		{TaskID: b.ID, Started: true},
		{TaskID: b.ID, Started: true},
		{TaskID: a.ID, Status: queue.StatusSucceeded, Attempts: 1, HTTPStatus: 200, OperationID: "op-a"},
	})
	if err != nil {
		t.Fatal(err)
	}
	ta, _, _ := s.Task(ctx, a.ID)
	if ta.Status != state.TaskSucceeded || ta.AttemptEpoch != 0 || ta.OperationID != "op-a" || ta.Attempts != 1 || ta.CompletedAt.IsZero() {
		t.Fatalf("task with a marker and a result: %+v", ta)
	}
	tb, _, _ := s.Task(ctx, b.ID)
	if tb.Status != state.TaskPending || tb.AttemptEpoch != epoch || tb.Attempts != 0 || !tb.CompletedAt.IsZero() {
		t.Fatalf("task with a marker only: %+v", tb)
	}
	// A stale epoch writes nothing, markers included.
	if err := s.Complete(ctx, shard, epoch-1, []queue.Result{{TaskID: b.ID, Status: queue.StatusSucceeded}}); err == nil {
		t.Fatal("a stale epoch's write was accepted")
	}
	if tb, _, _ := s.Task(ctx, b.ID); tb.Status != state.TaskPending {
		t.Fatalf("a stale epoch's result landed: %+v", tb)
	}
}

// The queue's view reuses a shard's backlog count for backlogTTL; the
// store itself answers exactly.
func TestForQueueReusesBacklogForTTL(t *testing.T) {
	s := openTest(t)
	ctx := t.Context()
	v := s.ForQueue().(*queueView)
	at := time.Now()
	v.now = func() time.Time { return at }
	if _, err := s.Submit(ctx, []state.NewTask{wakeTask(1, 2)}, time.Now()); err != nil {
		t.Fatal(err)
	}
	if n := v.Backlog(2); n != 1 {
		t.Fatalf("backlog %d, want 1", n)
	}
	if _, err := s.Submit(ctx, []state.NewTask{wakeTask(2, 2)}, time.Now()); err != nil {
		t.Fatal(err)
	}
	if n, exact := v.Backlog(2), s.Backlog(2); n != 1 || exact != 2 {
		t.Fatalf("within the TTL: view %d (want the reused 1), store %d (want 2)", n, exact)
	}
	at = at.Add(backlogTTL)
	if n := v.Backlog(2); n != 2 {
		t.Fatalf("after the TTL: backlog %d, want 2", n)
	}
	if _, ok := s.ForQueue().(queue.BlockedStore); !ok {
		t.Fatal("the queue's view lost the blocked walk")
	}
	if _, ok := s.ForQueue().(queue.ShardSubscriber); !ok {
		t.Fatal("the queue's view lost the per-shard subscription")
	}
}

// The pending count the submit limits reuse moves with this store's
// completes by the tasks that ended (markers and reschedules end none), so
// a flush does not make the next submit count every pending task again.
func TestCompleteMovesThePendingCount(t *testing.T) {
	s := openTest(t)
	ctx := t.Context()
	const shard, epoch = 1, 1
	if err := s.Acquire(ctx, shard, "n1", epoch); err != nil {
		t.Fatal(err)
	}
	a, b, c := wakeTask(1, shard), wakeTask(2, shard), wakeTask(3, shard)
	if _, err := s.Submit(ctx, []state.NewTask{a, b, c}, time.Now()); err != nil {
		t.Fatal(err)
	}
	if n := s.PendingTasks(ctx); n != 3 {
		t.Fatalf("pending %d, want 3", n)
	}
	at := time.Now()
	s.pending.set(3, at) // as counted, at a time the check below reads it
	err := s.Complete(ctx, shard, epoch, []queue.Result{
		{TaskID: a.ID, Status: queue.StatusSucceeded},
		{TaskID: b.ID, Started: true},
		{TaskID: c.ID, Status: queue.StatusPending, Attempts: 1, NextAttemptAt: time.Now().Add(time.Minute)},
	})
	if err != nil {
		t.Fatal(err)
	}
	if n, ok := s.pending.get(at); !ok || n != 2 {
		t.Fatalf("reused pending count %d (kept %v), want 2", n, ok)
	}
}

// Due gives the same tasks whether its walk starts with whole rows (little
// skipped last time) or with keys (the shard's last walk skipped some), and
// passes over the skipped ones either way.
func TestDueWalksRowsOrKeys(t *testing.T) {
	s := openTest(t)
	ctx := t.Context()
	const shard = 4
	at := time.Now().Add(-time.Minute)
	var tasks []state.NewTask
	for i := range 10 {
		tasks = append(tasks, wakeTask(100+i, shard))
	}
	if _, err := s.Submit(ctx, tasks, at); err != nil {
		t.Fatal(err)
	}
	later := wakeTask(200, shard)
	if _, err := s.Submit(ctx, []state.NewTask{later}, at.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	inflight := map[string]bool{}
	for _, tk := range tasks[:7] {
		inflight[tk.ID] = true
	}
	skip := func(id string) bool { return inflight[id] }
	for _, heavy := range []bool{false, true, true} {
		if got := s.skipHeavy(shard); got != heavy {
			t.Fatalf("skip-heavy %v, want %v", got, heavy)
		}
		due, _, known := s.Due(shard, time.Time{}, time.Now(), 2, skip)
		if len(due) != 2 || due[0].ID != tasks[7].ID || due[1].ID != tasks[8].ID {
			t.Fatalf("heavy=%v: due %d tasks, want tasks 7 and 8", heavy, len(due))
		}
		if known {
			// Task 9 is due and was left for want of room: a reader told
			// that its walk reached the end left task 9, when behind its
			// cursor, to the backstop full read.
			t.Fatalf("heavy=%v: a read cut short by its limit says it knows the next due time", heavy)
		}
		due, next, known := s.Due(shard, time.Time{}, time.Now(), 5, skip)
		if len(due) != 3 || due[2].ID != tasks[9].ID || !known || !next.Equal(micro(at.Add(time.Hour))) {
			t.Fatalf("heavy=%v: due %d tasks, next %v (known %v); want 3 and the later task's time", heavy, len(due), next, known)
		}
	}
}
